-- The credential that made an audited request when it is not an edge's
-- (audit.Event.Caller: the console searching as a principal, a service
-- calling as its bound identity); '' for the end user's own requests and
-- for the rows stored before it existed. A constant default adds the
-- column without rewriting the table.
ALTER TABLE audit_events ADD COLUMN caller text NOT NULL DEFAULT '';
