package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/services/textcut"
)

// ErrDuplicateMember: an object names a member twice. Unique's error for
// it is a *DuplicateError, which matches it.
var ErrDuplicateMember = errors.New("an object names a member twice")

// ErrTooDeep: the text nests arrays and objects deeper than allowed.
var ErrTooDeep = errors.New("JSON text nested too deeply")

// ErrMalformed: the text is not one JSON value (as far as its structure
// goes: Unique, like Each, does not check the grammar of numbers and
// literals).
var ErrMalformed = errors.New("not one JSON value")

// The bounds of what a DuplicateError quotes of the text: it is logged.
const (
	maxReportedName    = 64
	maxReportedPointer = 256
)

// DuplicateError is an object that names a member twice.
type DuplicateError struct {
	// Name is the repeated name, decoded, cut to 64 bytes.
	Name string
	// Pointer is the JSON Pointer (RFC 6901) of the object that repeats
	// it, "" for the top level, cut to 256 bytes.
	Pointer string
}

func (e *DuplicateError) Error() string {
	where := "the top-level object"
	if e.Pointer != "" {
		where = "the object at " + strconv.Quote(e.Pointer)
	}
	return "member " + strconv.Quote(e.Name) + " repeats in " + where
}

// Is makes errors.Is(err, ErrDuplicateMember) hold.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicateMember }

// Unique checks that no object in the JSON text b, at any depth (inside
// arrays too), names a member twice, comparing names as they decode: "a"
// and "\u0061" are one name, and so are two byte sequences that are not
// UTF-8 (a decoder reads both as U+FFFD). Names differing in case are
// different names. It fails with a *DuplicateError, with ErrTooDeep when
// arrays and objects nest deeper than maxDepth, or with ErrMalformed.
//
// It reads b once, without decoding values or copying names (but those
// written with escapes or bytes that are not UTF-8); the names of an
// object of many members go into a set, so the time is linear in len(b).
// Its memory is bounded by maxDepth and the widest object's names.
func Unique(b []byte, maxDepth int) error {
	var buf [32]span
	u := uniqueScan{b: b, maxDepth: maxDepth, names: buf[:0]}
	end, err := u.value(skipSpace(b, 0), 0)
	if err != nil {
		if d, ok := err.(*duplicate); ok {
			return d.report()
		}
		return err
	}
	if skipSpace(b, end) != len(b) {
		return ErrMalformed
	}
	return nil
}

// linearMembers is how many members of one object are compared one by
// one; past them the object's names go into a set.
const linearMembers = 16

// uniqueScan is one run of Unique.
type uniqueScan struct {
	b        []byte
	maxDepth int
	// names holds the names read so far of every object open, outermost
	// first (each object's from the length it found on entry); an object
	// that outgrows linearMembers keeps its names in a set instead.
	names []span
	// decoded holds the names that had to be decoded (escapes, bytes
	// that are not UTF-8).
	decoded [][]byte
}

// span is a name: b[start:end], or decoded[-start-1] when start < 0.
// Spans hold no pointers, so keeping them costs no write barriers.
type span struct{ start, end int }

func (u *uniqueScan) name(s span) []byte {
	if s.start < 0 {
		return u.decoded[-s.start-1]
	}
	return u.b[s.start:s.end]
}

// duplicate is a DuplicateError under construction: the path is
// collected from the innermost level out as the scan returns.
type duplicate struct {
	name     []byte
	segments []string // innermost first
}

func (d *duplicate) Error() string { return ErrDuplicateMember.Error() }

func (d *duplicate) report() *DuplicateError {
	var p strings.Builder
	for i := len(d.segments) - 1; i >= 0 && p.Len() < maxReportedPointer; i-- {
		p.WriteByte('/')
		p.WriteString(d.segments[i])
	}
	return &DuplicateError{Name: textcut.Prefix(string(d.name), maxReportedName), Pointer: textcut.Prefix(p.String(), maxReportedPointer)}
}

// pointerSegment is a member name as a JSON Pointer segment (RFC 6901:
// "~" as "~0", "/" as "~1"), cut to maxReportedName bytes.
func pointerSegment(name []byte) string {
	s := textcut.Prefix(string(name), maxReportedName)
	if strings.ContainsAny(s, "~/") {
		s = strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
	}
	return s
}

// value reads the value at b[i] (no leading space) at nesting depth and
// returns the index just past it.
func (u *uniqueScan) value(i, depth int) (int, error) {
	b := u.b
	if i >= len(b) {
		return 0, ErrMalformed
	}
	switch b[i] {
	case '{':
		return u.object(i, depth+1)
	case '[':
		return u.array(i, depth+1)
	case '"':
		end, _ := StringEnd(b, i)
		if end < 0 {
			return 0, ErrMalformed
		}
		return end, nil
	}
	end := SkipValue(b, i)
	if end < 0 {
		return 0, ErrMalformed
	}
	return end, nil
}

func (u *uniqueScan) object(i, depth int) (int, error) {
	if depth > u.maxDepth {
		return 0, ErrTooDeep
	}
	first, decoded := len(u.names), len(u.decoded)
	end, err := u.members(i, depth, first)
	u.names = u.names[:first]
	clear(u.decoded[decoded:])
	u.decoded = u.decoded[:decoded]
	return end, err
}

// members reads the members of the object at b[i], its names from
// u.names[first:].
func (u *uniqueScan) members(i, depth, first int) (int, error) {
	b := u.b
	var set map[string]struct{}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, ErrMalformed
		}
		end, escaped := StringEnd(b, i)
		if end < 0 {
			return 0, ErrMalformed
		}
		name, sp := b[i+1:end-1], span{i + 1, end - 1}
		if escaped || !utf8.Valid(name) {
			var s string
			if json.Unmarshal(b[i:end], &s) != nil {
				return 0, ErrMalformed
			}
			name = []byte(s)
			if set == nil {
				u.decoded = append(u.decoded, name)
				sp = span{-len(u.decoded), 0}
			}
		}
		if set != nil {
			if _, dup := set[string(name)]; dup {
				return 0, &duplicate{name: name}
			}
			set[string(name)] = struct{}{}
		} else {
			for _, n := range u.names[first:] {
				if bytes.Equal(u.name(n), name) {
					return 0, &duplicate{name: name}
				}
			}
			u.names = append(u.names, sp)
			if len(u.names)-first > linearMembers {
				set = make(map[string]struct{}, 2*linearMembers)
				for _, n := range u.names[first:] {
					set[string(u.name(n))] = struct{}{}
				}
			}
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, ErrMalformed
		}
		vend, err := u.value(skipSpace(b, i+1), depth)
		if err != nil {
			if d, ok := err.(*duplicate); ok {
				d.segments = append(d.segments, pointerSegment(name))
			}
			return 0, err
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return 0, ErrMalformed
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return 0, ErrMalformed
		}
		i = skipSpace(b, i+1)
	}
}

func (u *uniqueScan) array(i, depth int) (int, error) {
	if depth > u.maxDepth {
		return 0, ErrTooDeep
	}
	b := u.b
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for n := 0; ; n++ {
		end, err := u.value(i, depth)
		if err != nil {
			if d, ok := err.(*duplicate); ok {
				d.segments = append(d.segments, strconv.Itoa(n))
			}
			return 0, err
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return 0, ErrMalformed
		}
		if b[i] == ']' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return 0, ErrMalformed
		}
		i = skipSpace(b, i+1)
	}
}
