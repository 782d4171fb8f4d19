-- 0015: the event reason `StartDeadlineExceeded`: a workload failed because no pod of it had
-- started `start_deadline_seconds` after its admission. Every existing row keeps a reason the
-- new list contains.

ALTER TABLE events
    DROP CONSTRAINT events_reason_known,
    ADD CONSTRAINT events_reason_known
        CHECK (reason IN ('Created', 'Replaced', 'QuotaChanged', 'Deleted', 'LabelsRestored',
                          'QueuesRestored', 'JobRecreated', 'JobRejected',
                          'StartDeadlineExceeded'));
