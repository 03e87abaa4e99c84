package console

import "github.com/switchboard-mcp/switchboard/services/rawjson"

// indented is the valid JSON text s indented by two spaces as json.Indent
// would, but only until it passes limit bytes. json.Indent writes the
// whole text first, and indentation grows with the square of the nesting:
// a backend's 20 KB result nested 10,000 deep indents to 100 MB, of which
// a page shows 64 KiB.
func indented(s string, limit int) string {
	out := make([]byte, 0, min(len(s)+len(s)/4, limit)+64)
	depth := 0
	newline := func() {
		out = append(out, '\n')
		for range depth {
			out = append(out, ' ', ' ')
		}
	}
	for i := 0; i < len(s) && len(out) <= limit; i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\r':
		case '"':
			end, _ := rawjson.StringEnd(s, i)
			if end < 0 {
				end = len(s)
			}
			out = append(out, s[i:end]...)
			i = end - 1
		case '{', '[':
			j := i + 1
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
				j++
			}
			if j < len(s) && (s[j] == '}' || s[j] == ']') {
				// Empty: {} or [], as json.Indent writes it.
				out = append(out, c, s[j])
				i = j
				continue
			}
			depth++
			out = append(out, c)
			newline()
		case '}', ']':
			depth--
			newline()
			out = append(out, c)
		case ',':
			out = append(out, ',')
			newline()
		case ':':
			out = append(out, ':', ' ')
		default:
			out = append(out, c)
		}
	}
	return string(out)
}
