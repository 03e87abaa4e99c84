package override

import (
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Arguments returns the arguments a call sends to the backend: client (the
// call's arguments as the client sent them; empty or null means none) with
// every hidden argument's value and every defaulted argument the client
// left out added after the client's own members. The client's text is
// kept byte for byte: the additions are spliced in before its closing
// brace, so a call costs one validation and one scan of the client's
// bytes, and a call that needs no addition returns client itself.
//
// A client that sets a hidden argument (under any spelling of its name
// that decodes to it, null included) gets a *HiddenArgumentError; a client
// that sets a defaulted argument keeps its own value, null included.
// Arguments that are not one JSON object get ErrArgumentsNotObject. This
// is the one check of that for every tool's call, a nil Tool (no
// override) included: an override that adds nothing once let an array
// through to the backend, where a tool without one refused it.
func (t *Tool) Arguments(client []byte) ([]byte, error) {
	body := trimSpace(client)
	if string(body) == "null" {
		body = nil
	}
	if len(body) > 0 && (body[0] != '{' || !json.Valid(body)) {
		return nil, ErrArgumentsNotObject
	}
	if t == nil || len(t.hidden)+len(t.defaults) == 0 {
		if len(body) == 0 {
			return nil, nil
		}
		return client, nil
	}
	// present marks the defaulted arguments the client set.
	var present uint64
	var presentMore []bool
	if len(t.defaults) > 64 {
		presentMore = make([]bool, len(t.defaults))
	}
	members, missing := 0, len(t.defaults)
	var hiddenSet *HiddenArgumentError
	if len(body) > 0 && !rawjson.Each(body, func(m rawjson.Member) bool {
		members++
		i, hidden := t.lookup(m.Name)
		switch {
		case i < 0:
		case hidden:
			hiddenSet = &HiddenArgumentError{Argument: t.hidden[i].name}
			return false
		case presentMore != nil:
			if !presentMore[i] {
				presentMore[i] = true
				missing--
			}
		case present&(1<<i) == 0:
			present |= 1 << i
			missing--
		}
		return true
	}) {
		return nil, ErrArgumentsNotObject
	}
	if hiddenSet != nil {
		return nil, hiddenSet
	}
	if len(t.hidden) == 0 && missing == 0 {
		return client, nil
	}
	size := len(body) + 2
	for _, a := range t.hidden {
		size += len(a.member) + 1
	}
	for _, a := range t.defaults {
		size += len(a.member) + 1
	}
	out := make([]byte, 0, size)
	n := 0
	if members == 0 {
		out = append(out, '{')
	} else {
		// body is a valid object: it ends with its closing brace.
		out = append(out, trimSpace(body[:len(body)-1])...)
		n = members
	}
	add := func(a *argument) {
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, a.member...)
	}
	for i := range t.hidden {
		add(&t.hidden[i])
	}
	for i := range t.defaults {
		if presentMore != nil && presentMore[i] || presentMore == nil && present&(1<<i) != 0 {
			continue
		}
		add(&t.defaults[i])
	}
	return append(out, '}'), nil
}

func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
