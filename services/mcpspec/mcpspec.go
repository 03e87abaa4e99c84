// Package mcpspec holds the facts of the MCP specification that more than
// one part of Switchboard needs, written down once: the protocol revisions
// served, the method set of each era, and the rule that tells the eras
// apart on one Streamable HTTP endpoint. It is pure: no I/O, no state.
package mcpspec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
)

// Protocol revisions.
const (
	// Modern is the stateless revision: every request carries its version
	// and the client's capabilities in params._meta.
	Modern = "2026-07-28"
	// Legacy is the session revision: initialize, then Mcp-Session-Id.
	Legacy = "2025-11-25"
)

// SupportedVersions are the revisions served, newest first, as reported in
// server/discover and in UnsupportedProtocolVersion errors.
var SupportedVersions = []string{Modern, Legacy}

// olderLegacy are revisions a Legacy client may still announce in
// MCP-Protocol-Version; a session pins Legacy regardless.
var olderLegacy = map[string]bool{Legacy: true, "2025-06-18": true, "2025-03-26": true, "2024-11-05": true}

// IsLegacyVersion reports whether v names a session-era revision.
func IsLegacyVersion(v string) bool { return olderLegacy[v] }

// _meta keys of the Modern revision.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
)

// Extensions a client or server may declare in capabilities.extensions.
const (
	// ExtensionTasks is tasks (2026-07-28): tools/call may answer with a
	// task, and tasks/get, tasks/update and tasks/cancel serve it.
	ExtensionTasks = "io.modelcontextprotocol/tasks"
	// ExtensionUI is MCP Apps (SEP-1865): tools name ui:// pages a host
	// renders.
	ExtensionUI = "io.modelcontextprotocol/ui"
)

// Era is the protocol generation a request is served under.
type Era int

const (
	// EraUnknown: the request carries no marker of either era (a ping or a
	// notification without a session, a GET without a session, a request
	// whose only marker is an unknown header version).
	EraUnknown Era = iota
	EraModern
	EraLegacy
)

func (e Era) String() string {
	switch e {
	case EraModern:
		return "modern"
	case EraLegacy:
		return "legacy"
	}
	return "unknown"
}

// Signals are what the era of one HTTP request is decided from.
type Signals struct {
	// HTTPMethod is the request's HTTP method.
	HTTPMethod string
	// HeaderVersion is the MCP-Protocol-Version header ("" if absent).
	HeaderVersion string
	// SessionID is the Mcp-Session-Id header ("" if absent).
	SessionID string
	// Method is the JSON-RPC method of a POST body ("" for a response).
	Method string
	// MetaVersion is the body's params._meta protocolVersion member as
	// written (of any type: a non-string one still marks a Modern request,
	// an invalid one); nil when it is absent.
	MetaVersion json.RawMessage
}

// Classify is the one rule that tells the eras apart, in this order:
//
//  1. Only a POST can be Modern; GET and DELETE belong to a Legacy session.
//  2. A body with Modern _meta is Modern (the spec: "a request with Modern
//     _meta is served statelessly"), whatever its headers say, so that its
//     header problems are answered with Modern errors. A request in a
//     session whose _meta names a revision before 2026-07-28 is not: go-sdk
//     reads such a _meta as Legacy, and so does a client that sends it.
//  3. initialize, or any request in a session, is Legacy.
//  4. An MCP-Protocol-Version header naming a Modern revision is Modern
//     (its missing _meta is then a Modern error).
//  5. Anything else carries no era marker.
func Classify(s Signals) Era {
	if s.HTTPMethod != "POST" {
		if s.SessionID != "" {
			return EraLegacy
		}
		return EraUnknown
	}
	switch {
	case s.MetaVersion != nil && !(s.SessionID != "" && namesLegacy(s.MetaVersion)):
		return EraModern
	case s.Method == "initialize" || s.SessionID != "":
		return EraLegacy
	case s.HeaderVersion >= Modern:
		return EraModern
	}
	return EraUnknown
}

// namesLegacy reports whether v is a revision string before Modern.
func namesLegacy(v json.RawMessage) bool {
	var version string
	return json.Unmarshal(v, &version) == nil && version < Modern
}

// Method describes one client request method.
type Method struct {
	// Modern and Legacy say which eras define the method.
	Modern, Legacy bool
	// Target names the params member that Mcp-Name mirrors in the Modern
	// era ("name" or "uri"), empty when there is none.
	Target string
	// Streams: the response is a long-lived notification stream.
	Streams bool
	// Waits: the response may come long after the request (tasks/result
	// waits for its task to end), which acts for its caller meanwhile.
	Waits bool
	// Task: a request about a task (the tasks extension of 2026-07-28, the
	// experimental tasks of 2025-11-25); a Modern client must declare the
	// extension to make one.
	Task bool
}

// Methods is the client request method set of both eras. Everything else,
// including the methods Modern removed, is "method not found".
var Methods = map[string]Method{
	"server/discover":          {Modern: true},
	"subscriptions/listen":     {Modern: true, Streams: true},
	"initialize":               {Legacy: true},
	"ping":                     {Legacy: true},
	"logging/setLevel":         {Legacy: true},
	"resources/subscribe":      {Legacy: true},
	"resources/unsubscribe":    {Legacy: true},
	"tools/list":               {Modern: true, Legacy: true},
	"tools/call":               {Modern: true, Legacy: true, Target: "name"},
	"resources/list":           {Modern: true, Legacy: true},
	"resources/templates/list": {Modern: true, Legacy: true},
	"resources/read":           {Modern: true, Legacy: true, Target: "uri"},
	"prompts/list":             {Modern: true, Legacy: true},
	"prompts/get":              {Modern: true, Legacy: true, Target: "name"},
	"completion/complete":      {Modern: true, Legacy: true},
	// Tasks: 2026-07-28's extension has tasks/get, tasks/update and
	// tasks/cancel, each naming its task in Mcp-Name; 2025-11-25's
	// experimental tasks have tasks/get, tasks/list, tasks/cancel and
	// tasks/result.
	"tasks/get":    {Modern: true, Legacy: true, Target: "taskId", Task: true},
	"tasks/update": {Modern: true, Target: "taskId", Task: true},
	"tasks/cancel": {Modern: true, Legacy: true, Target: "taskId", Task: true},
	"tasks/list":   {Legacy: true, Task: true},
	"tasks/result": {Legacy: true, Task: true, Waits: true},
}

// Defined reports whether era defines method.
func Defined(era Era, method string) bool {
	m, ok := Methods[method]
	switch {
	case !ok:
		return false
	case era == EraModern:
		return m.Modern
	case era == EraLegacy:
		return m.Legacy
	}
	return false
}

// InputCapability names the client capability each kind of server-to-client
// input request needs (elicitation, sampling, roots). A request that needs
// an undeclared one must not be sent.
var InputCapability = map[string]string{
	"elicitation/create":     "elicitation",
	"sampling/createMessage": "sampling",
	"roots/list":             "roots",
}

// LogLevels are MCP's log levels (RFC 5424 severities), lowest first.
var LogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// IsLogLevel reports whether l is one of LogLevels.
func IsLogLevel(l string) bool {
	for _, v := range LogLevels {
		if v == l {
			return true
		}
	}
	return false
}

// Task statuses (the tasks of 2025-11-25 and of the 2026-07-28 tasks
// extension name them alike).
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// TaskEnded reports whether a task in status has ended: nothing changes
// it any more.
func TaskEnded(status string) bool {
	return status == TaskCompleted || status == TaskFailed || status == TaskCancelled
}

// LastMessage is the last JSON-RPC message of a Streamable HTTP response
// body: the body itself unless it is an event stream (Content-Type
// text/event-stream), whose last data line it is then; at most 32 MiB a
// line.
func LastMessage(contentType string, body []byte) []byte {
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return body
	}
	var last []byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 32<<20)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
			last = append(last[:0], bytes.TrimSpace(d)...)
		}
	}
	return last
}
