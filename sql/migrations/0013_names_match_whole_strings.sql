-- 0010: rows named before every name rule matched the whole string are deleted.
--
-- Python's `$` also matches before a final newline, so names such as 'nlproj\n' passed the
-- rules and were stored. No cluster object was ever made for them (the apiserver refuses such
-- a name) and the API can address none of them (lookups match names as whole strings). They
-- are marked for deletion here, their children first; the reconciler finds nothing of theirs
-- in the cluster and finalizes them (event, tombstone) without a retry loop. A binding of such
-- a class or flavor is removed when no pool uses it.
--
-- In PostgreSQL's regular expressions `$` matches only at the very end of the string.

UPDATE workloads AS w
SET deletion_requested_at = now(), state = 'DELETING', updated_at = now(),
    state_reason = 'Deletion requested: a name in it is not a valid name, so it can never run.'
FROM projects AS p, compute_pools AS c
WHERE w.project_id = p.id AND w.pool_id = c.id AND w.deletion_requested_at IS NULL
  AND (w.name !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
       OR c.name !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
       OR p.name !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
       OR c.accelerator_class !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$');

UPDATE compute_pools AS c
SET deletion_requested_at = now(), state = 'DELETING', updated_at = now(),
    state_reason = 'Deletion requested: a name in it is not a valid name, so it has no queues.'
FROM projects AS p
WHERE c.project_id = p.id AND c.deletion_requested_at IS NULL
  AND (c.name !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
       OR p.name !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
       OR c.accelerator_class !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$');

UPDATE projects
SET deletion_requested_at = now(), state = 'DELETING', updated_at = now(),
    state_reason = 'Deletion requested: its name is not a valid name, so it has no namespace.'
WHERE deletion_requested_at IS NULL AND name !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';

DELETE FROM accelerator_bindings AS b
WHERE (b.accelerator_class !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
       OR b.flavor !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
  AND NOT EXISTS (SELECT 1 FROM compute_pools AS c WHERE c.accelerator_class = b.accelerator_class);
