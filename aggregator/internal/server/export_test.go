package server

// AuditOutcome exposes auditOutcome to the external tests.
var AuditOutcome = auditOutcome
