package postgres

import (
	"fmt"
	"slices"
	"strings"
)

// analysed is a document's tsvector as ts_rank sees it: its lexemes in
// tsvector order (byte order) and, for each, the weight classes of its
// positions in position order.
type analysed struct {
	lexemes []string
	// weights holds every entry's weight classes (0 = D … 3 = A) back to
	// back; entry i's are weights[offsets[i]:offsets[i+1]].
	weights []uint8
	offsets []int32
	// length is cnt_length: the number of positions, an entry without
	// positions counting one.
	length int
	// logLength and logLexemes are ts_rank's log-length divisors of the
	// positions and of the lexemes.
	logLength, logLexemes float64
}

func (a *analysed) entryWeights(i int) []uint8 { return a.weights[a.offsets[i]:a.offsets[i+1]] }

// parseTSVector reads tsvector's text output: entries separated by spaces,
// each a quoted lexeme (quotes and backslashes doubled) optionally followed
// by ':' and comma-separated positions, each a number and a weight letter
// (A, B or C; none for D).
func parseTSVector(text string) (analysed, error) {
	type entry struct {
		lexeme  string
		weights []uint8
	}
	var entries []entry
	for i := 0; i < len(text); {
		if text[i] == ' ' {
			i++
			continue
		}
		if text[i] != '\'' {
			return analysed{}, fmt.Errorf("tsvector: expected a quoted lexeme at %d", i)
		}
		var lex strings.Builder
		i++
		for {
			if i >= len(text) {
				return analysed{}, fmt.Errorf("tsvector: unterminated lexeme")
			}
			c := text[i]
			if (c == '\'' || c == '\\') && i+1 < len(text) && text[i+1] == c {
				lex.WriteByte(c)
				i += 2
				continue
			}
			if c == '\'' {
				i++
				break
			}
			lex.WriteByte(c)
			i++
		}
		e := entry{lexeme: lex.String()}
		if i < len(text) && text[i] == ':' {
			i++
			for {
				start := i
				for i < len(text) && '0' <= text[i] && text[i] <= '9' {
					i++
				}
				if i == start {
					return analysed{}, fmt.Errorf("tsvector: expected a position at %d", i)
				}
				class := uint8(0) // D
				if i < len(text) && 'A' <= text[i] && text[i] <= 'C' {
					class = 3 - (text[i] - 'A')
					i++
				}
				e.weights = append(e.weights, class)
				if i < len(text) && text[i] == ',' {
					i++
					continue
				}
				break
			}
		} else {
			// No positions: ts_rank counts one position of weight D.
			e.weights = []uint8{0}
		}
		entries = append(entries, e)
	}
	// tsvector keeps its entries in byte order already; sorting makes that
	// a property of this code rather than of the output format.
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.lexeme, b.lexeme) })
	a := analysed{offsets: make([]int32, 0, len(entries)+1)}
	a.offsets = append(a.offsets, 0)
	for _, e := range entries {
		a.lexemes = append(a.lexemes, e.lexeme)
		a.weights = append(a.weights, e.weights...)
		a.offsets = append(a.offsets, int32(len(a.weights)))
		a.length += len(e.weights)
	}
	a.logLength, a.logLexemes = logLength(a.length), logLength(len(a.lexemes))
	return a, nil
}
