-- 0010: an Idempotency-Key remembers which resource its create made.
--
-- A replay answers the stored first response only while that resource still exists; once it
-- was deleted (or its deletion requested, or a token revoked) the replay is 410
-- created-resource-gone instead of a 202 for something that is no longer there
-- (app/api/idempotency.py). Keys stored before this migration have no resource and replay as
-- before.

ALTER TABLE idempotency_keys ADD COLUMN resource_kind text,
                             ADD COLUMN resource_id uuid;
