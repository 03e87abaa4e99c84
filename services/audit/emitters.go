package audit

import "slices"

// emitters is the one table of who writes what: for each service (an
// Event's Service, config.AuditServices), the kinds of events it records
// (docs/operations.md, "Audit trail", has it as a table of kinds). The
// indexer stores an event shipped to RecordAuditEvents only when the
// shipping credential is bound to its service
// (serviceAuth.credentials[].auditService) and the kind is one that
// service records here. A service that starts recording a new kind adds
// it here; the indexer must be upgraded first (it refuses the kind until
// it knows it).
var emitters = map[string][]Kind{
	// The gateway: Legacy sessions, which only it sees, and the requests
	// of the trail's that it refuses before asking the aggregator or the
	// indexer (gateway/internal/edge/audit.go); its reloads.
	"gateway": {KindSessionStart, KindSessionEnd, KindToolCall, KindResourceRead, KindResourceSubscribe, KindPromptGet,
		KindCompletion, KindFindTool, KindConfigReload, KindTaskGet, KindTaskUpdate, KindTaskCancel, KindTaskList},
	// The aggregator: every call, read, prompt, completion, subscription
	// and request about a task it is asked (aggregator/internal/server), quarantines
	// (aggregator/internal/pinning); its reloads.
	"aggregator": {KindToolCall, KindResourceRead, KindResourceSubscribe, KindPromptGet, KindCompletion, KindQuarantine,
		KindConfigReload, KindTaskGet, KindTaskUpdate, KindTaskCancel, KindTaskList, KindTaskEnd, KindCodeRun},
	// The indexer: find_tool (indexer/internal/server/search.go); its
	// reloads. It writes its own table directly, never through
	// RecordAuditEvents.
	"indexer": {KindFindTool, KindConfigReload},
}

// Emits reports whether service records events of kind.
func Emits(service string, kind Kind) bool {
	return slices.Contains(emitters[service], kind)
}
