package stdio

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
)

// jsonLines passes on a server's stdout lines that are messages (or
// empty) whole, however long and however read, and writes the others to
// junk, JSON that is no message and messages go-sdk refuses included.
func TestJSONLinesPassesMessagesOnly(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("m", 200<<10) + `"}}` + "\n"
	passed := []string{
		`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n",
		"\n",
		` [{"jsonrpc":"2.0","method":"notifications/message"},{"jsonrpc":"2.0","id":3,"result":{}}]` + "\r\n",
		long,
		`{"jsonrpc":"2.0","id":4,"result":{}}`, // the last, without a newline
	}
	junk := []string{
		"Starting the server\n",
		`{"level":"info","msg":"a log line"}` + "\n",
		`{'python': 'dict'}` + "\n",
		"[1, 2, 3]\n",
		"[INFO] ready\n",
		`{"jsonrpc":"1.0","id":5}` + "\n",
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}` + "\n",
		`{"jsonrpc":"2.0","id":{"n":6},"result":{}}` + "\n",
		strings.Repeat("x", 200<<10) + "\n",
	}
	in := strings.Join([]string{junk[0], junk[1], passed[0], junk[2], passed[1], junk[3], passed[2], junk[4], junk[5], junk[6], junk[7], passed[3], junk[8], passed[4]}, "")
	var skipped bytes.Buffer
	l := &jsonLines{r: bufio.NewReaderSize(strings.NewReader(in), 64<<10), junk: &skipped}
	var out bytes.Buffer
	buf := make([]byte, 1000) // reads smaller than a line
	for {
		n, err := l.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, want := out.String(), strings.Join(passed, ""); got != want {
		t.Errorf("passed on %d bytes, want %d: %.200q", len(got), len(want), got)
	}
	if got, want := skipped.String(), strings.Join(junk, ""); got != want {
		t.Errorf("junk %d bytes, want %d: %.200q", len(got), len(want), got)
	}
}
