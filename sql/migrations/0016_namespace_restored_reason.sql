-- 0016: the event reason NamespaceRestored (a project's namespace deleted outside aicp was
-- re-created: docs/DESIGN.md §8) joins the reasons an event row may carry.

ALTER TABLE events DROP CONSTRAINT events_reason_known;

ALTER TABLE events
    ADD CONSTRAINT events_reason_known
        CHECK (reason IN ('Created', 'Replaced', 'QuotaChanged', 'Deleted', 'LabelsRestored',
                          'QueuesRestored', 'NamespaceRestored', 'JobRecreated',
                          'JobRejected', 'StartDeadlineExceeded'));
