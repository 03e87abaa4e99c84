package console

import (
	"fmt"
	"net/url"
	"strings"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// Bounds of what a "view as" form may name. The gateway itself bounds a
// principal's groups only by the size of the credential that carries them
// (a token's groups claim; an API key's configured list), so the console
// takes as many as one query can reasonably hold: maxGroups of up to
// maxGroupBytes (a directory DN is long), maxGroupsBytes in all.
const (
	maxSubjectBytes = 1024
	maxGroups       = 512
	maxGroupBytes   = 1024
	maxGroupsBytes  = 64 << 10
	maxQueryBytes   = 2048
	// maxKeywords bounds the search's keywords (find_tool's keywords
	// array, one per line).
	maxKeywords = 32
)

// serverView is a virtual server as the view-as form offers it.
type serverView struct {
	Name string
	// Optimizer: /mcp/<name> serves find_tool and call_tool, the
	// server's tools only through them (and as such at /mcp/<name>/raw).
	Optimizer bool
	// CodeMode: its optimizer view offers run_code too, as the
	// configuration has it (config.CodeModeIn); the catalog page of the
	// chosen server goes by Discover's code_mode instead.
	CodeMode bool
}

// viewAs is the principal and server a page acts for, as the form gave
// them.
type viewAs struct {
	Subject string
	// Groups are one per line of the form's textarea, or the repeated
	// groups= parameters of a link: never split on commas, which a
	// group's name (an LDAP DN) may hold.
	Groups []string
	Server string
	// Servers are the virtual servers to choose from ("" is /mcp).
	Servers []serverView
	// Optimizer is set when the chosen path serves the optimizer view.
	Optimizer bool
}

// GroupsText is the groups as the textarea shows them.
func (v viewAs) GroupsText() string { return strings.Join(v.Groups, "\n") }

// Principal is the principal the page's calls assert: the anonymous one
// when neither subject nor groups are given.
func (v viewAs) Principal() *commonv1.Principal {
	return &commonv1.Principal{Subject: v.Subject, Groups: v.Groups}
}

// Label names the principal for the page.
func (v viewAs) Label() string {
	who := "the anonymous principal"
	if v.Subject != "" {
		who = v.Subject
	}
	if len(v.Groups) > 0 {
		who += " (groups " + strings.Join(v.Groups, "; ") + ")"
	}
	return who
}

// Path names the server's MCP path.
func (v viewAs) Path() string {
	if v.Server == "" {
		return "/mcp"
	}
	return "/mcp/" + v.Server
}

// RawPath is the path that lists the tools find_tool searches.
func (v viewAs) RawPath() string { return v.Path() + "/raw" }

// query is the view as link parameters (groups repeated).
func (v viewAs) query() url.Values {
	q := url.Values{"server": {v.Server}, "subject": {v.Subject}}
	if len(v.Groups) > 0 {
		q["groups"] = v.Groups
	}
	return q
}

// readLines reads a list field: every value of the parameter (repeated
// parameters), each split into lines (a textarea), blank lines dropped
// and surrounding space trimmed.
func readLines(values []string) []string {
	var out []string
	for _, v := range values {
		for line := range strings.SplitSeq(v, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	return out
}

// readViewAs reads subject, groups and server from a page's query,
// within bounds; the server must be a configured one.
func (c *Console) readViewAs(q url.Values) (viewAs, error) {
	live := c.live.Load()
	v := viewAs{Subject: q.Get("subject"), Server: q.Get("server"), Servers: live.servers, Optimizer: live.rootOptimizer}
	if len(v.Subject) > maxSubjectBytes {
		return v, fmt.Errorf("the subject is longer than %d bytes", maxSubjectBytes)
	}
	total := 0
	for _, g := range q["groups"] {
		total += len(g)
	}
	if total > maxGroupsBytes {
		return v, fmt.Errorf("the groups are longer than %d bytes in all", maxGroupsBytes)
	}
	v.Groups = readLines(q["groups"])
	if len(v.Groups) > maxGroups {
		return v, fmt.Errorf("more than %d groups", maxGroups)
	}
	for _, g := range v.Groups {
		if len(g) > maxGroupBytes {
			return v, fmt.Errorf("a group is longer than %d bytes", maxGroupBytes)
		}
	}
	if v.Server != "" {
		known := false
		for _, s := range v.Servers {
			if s.Name == v.Server {
				known, v.Optimizer = true, s.Optimizer
			}
		}
		if !known {
			return v, fmt.Errorf("no virtual server is named %q", v.Server)
		}
	}
	return v, nil
}
