package rawjson

// Elements calls f with every element of the array b, as written, in order,
// until f returns false. It reports whether b is an array (as far as it
// was read). Like Each, it checks structure, not the values' grammar.
func Elements(b []byte, f func(value []byte) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return skipSpace(b, i+1) == len(b)
	}
	for i < len(b) {
		end := SkipValue(b, i)
		if end < 0 {
			return false
		}
		if !f(b[i:end]) {
			return true
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return false
		}
		if b[i] == ']' {
			return skipSpace(b, i+1) == len(b)
		}
		if b[i] != ',' {
			return false
		}
		i = skipSpace(b, i+1)
	}
	return false
}

// WithMember returns a copy of the object b in which the member name has
// value (JSON text): in the place of its first occurrence, later
// occurrences dropped, every other member copied byte for byte; appended
// when b has no such member. It fails with ErrNotObject when b is not an
// object.
func WithMember(b []byte, name string, value []byte) ([]byte, error) {
	out := make([]byte, 0, len(b)+len(value)+len(name)+4)
	out = append(out, '{')
	placed, n := false, 0
	write := func(rawName, v []byte) {
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, rawName...)
		out = append(out, ':')
		out = append(out, v...)
	}
	quoted := AppendString(nil, name)
	if !Each(b, func(m Member) bool {
		if string(m.Name) != name {
			write(m.RawName, m.Value)
		} else if !placed {
			write(quoted, value)
			placed = true
		}
		return true
	}) {
		return nil, ErrNotObject
	}
	if !placed {
		write(quoted, value)
	}
	return append(out, '}'), nil
}
