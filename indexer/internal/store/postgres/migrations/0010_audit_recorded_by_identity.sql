-- How the credential named by recorded_by authenticated when it shipped
-- the event (svcauth.Caller.Identity): 'token', or the verified client
-- certificate's name that named it ('uriSAN spiffe://...', 'dnsSAN ...',
-- 'commonName ...'); 'local' for the indexer's own events; '' for the rows
-- stored before it existed. A constant default adds the column without
-- rewriting the table.
ALTER TABLE audit_events ADD COLUMN recorded_by_identity text NOT NULL DEFAULT '';
