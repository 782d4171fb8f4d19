-- 0005: lease incarnations, and audit events recorded at most once.
--
-- A lease names its owner (the instance id, which survives a container restart in Kubernetes)
-- and now also the owner's incarnation: a token drawn by each process at start. A process that
-- restarts under the same instance id renews only its own incarnation's leases and expires its
-- dead predecessor's at start, so peers (or itself) take them over at once rather than after a
-- renewal and a TTL. Existing rows belong to no incarnation ('').
ALTER TABLE leases ADD COLUMN incarnation text NOT NULL DEFAULT '';

-- Some controller events describe a fact that happens once (the Job of a generation was
-- created; the evidence of one Job was recorded). Such a row carries a once_key naming that
-- fact, and a second insert of the same fact for the same resource is skipped, whichever
-- replica (a stale owner, an adopter, a retry after a failed side effect) attempts it.
ALTER TABLE events ADD COLUMN once_key text;
CREATE UNIQUE INDEX events_once ON events (kind, resource_id, once_key)
    WHERE once_key IS NOT NULL;
