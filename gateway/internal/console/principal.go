package console

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// Bounds of what a "view as" form may name.
const (
	maxSubjectBytes = 1024
	maxGroups       = 64
	maxGroupBytes   = 256
	maxQueryBytes   = 2048
)

// viewAs is the principal and server a page acts for, as the form gave
// them.
type viewAs struct {
	Subject, Groups, Server string
	// Servers are the virtual servers to choose from ("" is /mcp).
	Servers []string
}

// Principal is the principal the page's calls assert: the anonymous one
// when neither subject nor groups are given.
func (v viewAs) Principal() *commonv1.Principal {
	p := &commonv1.Principal{Subject: v.Subject}
	for g := range strings.SplitSeq(v.Groups, ",") {
		if g = strings.TrimSpace(g); g != "" {
			p.Groups = append(p.Groups, g)
		}
	}
	return p
}

// Label names the principal for the page.
func (v viewAs) Label() string {
	p := v.Principal()
	who := "the anonymous principal"
	if p.Subject != "" {
		who = p.Subject
	}
	if len(p.Groups) > 0 {
		who += " (groups " + strings.Join(p.Groups, ", ") + ")"
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

// readViewAs reads subject, groups and server from a page's query,
// within bounds; the server must be a configured one.
func (c *Console) readViewAs(q url.Values) (viewAs, error) {
	v := viewAs{Subject: strings.TrimSpace(q.Get("subject")), Groups: q.Get("groups"), Server: q.Get("server"), Servers: c.live.Load().servers}
	if len(v.Subject) > maxSubjectBytes || !utf8.ValidString(v.Subject) {
		return v, fmt.Errorf("the subject is longer than %d bytes or not UTF-8", maxSubjectBytes)
	}
	groups := v.Principal().Groups
	if len(groups) > maxGroups {
		return v, fmt.Errorf("more than %d groups", maxGroups)
	}
	for _, g := range groups {
		if len(g) > maxGroupBytes || !utf8.ValidString(g) {
			return v, fmt.Errorf("a group is longer than %d bytes or not UTF-8", maxGroupBytes)
		}
	}
	if v.Server != "" {
		known := false
		for _, s := range v.Servers {
			known = known || s == v.Server
		}
		if !known {
			return v, fmt.Errorf("no virtual server is named %q", v.Server)
		}
	}
	return v, nil
}
