package backend

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseMessage(t *testing.T) {
	m, err := parseMessage([]byte(` {"jsonrpc":"2.0", "id" : "sb-1", "result" : {"content":[{"type":"text","text":"a}\"]"}],"isError":true,"resultType":"complete"} } `))
	if err != nil || string(m.id) != `"sb-1"` || !json.Valid(m.result) || m.err != nil || m.method != nil {
		t.Fatalf("parse: %+v %v", m, err)
	}
	if isErr, rt := resultFacts(m.result); !isErr || rt != "complete" {
		t.Fatalf("facts %v %q", isErr, rt)
	}
	n, err := parseMessage([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"sb-1","progress":1}}`))
	if err != nil || !n.isNotification() || !n.methodIs(MethodProgress) {
		t.Fatalf("notification: %+v %v", n, err)
	}
	for _, bad := range []string{``, `[]`, `{"id":1,}`, `{"id" 1}`, `{"id":"x"`, `{"id":1} trailing`} {
		if _, err := parseMessage([]byte(bad)); err == nil {
			t.Errorf("parseMessage(%q) accepted it", bad)
		}
	}
}

// TestParseMessageMakesUTF8: a byte that is not UTF-8 in a backend's
// message is read as U+FFFD, as a JSON decoder reads it into a string:
// the result is passed on in protobuf string fields, and gRPC refuses to
// send one that is not UTF-8 (every client's tools/list failed for one
// Latin-1 description).
func TestParseMessageMakesUTF8(t *testing.T) {
	m, err := parseMessage([]byte("{\"jsonrpc\":\"2.0\",\"id\":\"sb-1\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"caf\xe9 \xff\xfe!\"}]}}"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\"content\":[{\"type\":\"text\",\"text\":\"caf\uFFFD \uFFFD!\"}]}"; string(m.result) != want {
		t.Fatalf("result %q, want %q", m.result, want)
	}
}

func TestAnswerOf(t *testing.T) {
	m, _ := parseMessage([]byte(`{"jsonrpc":"2.0","id":"sb-9","error":{"code":-32602,"message":"unknown tool","data":{"name":"x"}}}`))
	_, err := answerOf(m, "sb-9")
	if err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("error answer: %v", err)
	}
	other, _ := parseMessage([]byte(`{"jsonrpc":"2.0","id":"sb-8","result":{}}`))
	if _, err := answerOf(other, "sb-9"); !errors.Is(err, ErrProtocolViolation) {
		t.Fatalf("answer for another id: %v", err)
	}
	invalid, _ := parseMessage([]byte(`{"jsonrpc":"2.0","id":"sb-9","result":{"a":tru}}`))
	if _, err := answerOf(invalid, "sb-9"); !errors.Is(err, ErrProtocolViolation) {
		t.Fatalf("invalid result: %v", err)
	}
}

func TestEventReader(t *testing.T) {
	long := strings.Repeat("x", 40<<10)
	stream := ": comment\r\n" +
		"id: 1\nevent: message\ndata: {\"a\":\ndata: 1}\n\n" +
		"event: other\ndata: skipped\n\n" +
		"id: 2\ndata:\n\n" +
		"data: \"" + long + "\"\n\n" +
		"data: last"
	e := newEventReader(strings.NewReader(stream))
	defer e.release()
	var got []string
	for {
		data, err := e.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(data))
	}
	want := []string{"{\"a\":\n1}", `"` + long + `"`, "last"}
	if len(got) != len(want) {
		t.Fatalf("got %d events", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %.40q, want %.40q", i, got[i], want[i])
		}
	}
}

// Every line end the format allows ends a line: LF, CRLF and a CR alone,
// also when a CRLF is split between two reads. A CR alone once ended no
// line, and a stream written with them was taken for one without an
// answer.
func TestEventReaderLineEnds(t *testing.T) {
	for _, stream := range []string{
		"event: message\rdata: {\"a\":1}\r\rdata: {\"b\":2}\r\r",
		"event: message\r\ndata: {\"a\":1}\r\n\r\ndata: {\"b\":2}\r\n\r\n",
		"event: message\ndata: {\"a\":1}\n\ndata: {\"b\":2}\n\n",
		"event: message\r\ndata: {\"a\":1}\r\rdata: {\"b\":2}\n\r\n",
	} {
		// One byte a read: every CRLF split between two.
		e := newEventReader(iotest.OneByteReader(strings.NewReader(stream)))
		var got []string
		for {
			data, err := e.next()
			if err != nil {
				break
			}
			got = append(got, string(data))
		}
		e.release()
		if strings.Join(got, " ") != `{"a":1} {"b":2}` {
			t.Errorf("%q: events %q", stream, got)
		}
	}
}

// TestModernStreamWithServerRequestFails: a server-to-client request on a
// Modern response stream is a protocol violation; the call ends at once.
func TestModernStreamWithServerRequestFails(t *testing.T) {
	c := newTestClient(Config{Name: "m", URL: "http://127.0.0.1:1"})
	defer c.Close()
	body := io.NopCloser(strings.NewReader("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"roots/list\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"sb-1\",\"result\":{}}\n\n"))
	_, err := c.readStream(t.Context(), body, "sb-1", &Call{Method: "tools/call"}, true, nil)
	if !errors.Is(err, ErrProtocolViolation) {
		t.Fatalf("err = %v", err)
	}
}

// TestStreamRelaysOwnProgressOnly: progress for another token (another
// call on a shared session) is not relayed; the response ends the read.
func TestStreamRelaysOwnProgressOnly(t *testing.T) {
	c := newTestClient(Config{Name: "m", URL: "http://127.0.0.1:1"})
	defer c.Close()
	var relayed []string
	call := &Call{Method: "tools/call", Progress: true, LogLevel: "warning", Notify: func(method string, params []byte) { relayed = append(relayed, method+" "+string(params)) }}
	body := io.NopCloser(strings.NewReader(
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"sb-2\",\"progress\":1}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"sb-1\",\"progress\":2}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"debug\",\"data\":\"quiet\"}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"error\",\"data\":\"loud\"}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":\"sb-1\",\"result\":{\"content\":[],\"vendor\":1}}\n\n"))
	res, err := c.readStream(t.Context(), body, "sb-1", call, true, nil)
	if err != nil || res.JSON != `{"content":[],"vendor":1}` {
		t.Fatalf("result %+v, %v", res, err)
	}
	if len(relayed) != 2 || !strings.Contains(relayed[0], `"progress":2`) || !strings.Contains(relayed[1], "loud") {
		t.Fatalf("relayed %q", relayed)
	}
}
