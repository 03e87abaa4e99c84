package wire

import "testing"

// TestEveryCodeMayBeEmitted: each code the gateway emits is one JSON-RPC
// or an MCP revision defines, or lies outside every reserved range
// (JSON-RPC's -32768..-32000, which MCP 2026-07-28 narrows: no new codes
// in -32000..-32019, none it does not define in -32020..-32099).
func TestEveryCodeMayBeEmitted(t *testing.T) {
	defined := map[int]string{
		-32700: "JSON-RPC parse error", -32600: "JSON-RPC invalid request", -32601: "JSON-RPC method not found",
		-32602: "JSON-RPC invalid params", -32603: "JSON-RPC internal error",
		-32002: "MCP 2025-11-25 resource not found",
		-32020: "MCP 2026-07-28 header mismatch", -32021: "MCP 2026-07-28 missing client capabilities",
		-32022: "MCP 2026-07-28 unsupported protocol version",
	}
	for name, code := range map[string]int{
		"CodeParseError": CodeParseError, "CodeInvalidRequest": CodeInvalidRequest, "CodeMethodNotFound": CodeMethodNotFound,
		"CodeInvalidParams": CodeInvalidParams, "CodeInternalError": CodeInternalError, "CodeResourceNotFound": CodeResourceNotFound,
		"CodeHeaderMismatch": CodeHeaderMismatch, "CodeMissingCapability": CodeMissingCapability, "CodeUnsupportedVer": CodeUnsupportedVer,
		"CodeRateLimited": CodeRateLimited,
	} {
		if _, ok := defined[code]; ok {
			continue
		}
		if code >= -32768 && code <= -32000 {
			t.Errorf("%s = %d: in a reserved range, and no specification defines it", name, code)
		}
	}
}
