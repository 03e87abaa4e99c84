package backend

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sync"
)

// eventReader reads the data of server-sent events (the text/event-stream
// format of the WHATWG HTML standard) the way MCP uses them: events named
// "message" (or unnamed) carry one JSON-RPC message each in their data;
// comments, ids, retry fields and events with empty data carry nothing the
// raw path needs.
type eventReader struct {
	r    *bufio.Reader
	ends lineEnds
	data bytes.Buffer
	name []byte
}

// lineEnds reads a stream with its line ends, any the format allows (LF,
// CRLF, or a CR alone), made LF, so that lines split at LF alone. A CR is
// only ever a line's end in an event stream: a JSON message escapes one
// inside a string.
type lineEnds struct {
	r io.Reader
	// cr is set when the last byte read was a CR: a LF right after it is
	// the same line end.
	cr bool
}

func (l *lineEnds) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if !l.cr && bytes.IndexByte(p[:n], '\r') < 0 {
		return n, err // LF alone, as every MCP SDK writes
	}
	out := 0
	for _, b := range p[:n] {
		if l.cr {
			l.cr = false
			if b == '\n' {
				continue
			}
		}
		if b == '\r' {
			l.cr, b = true, '\n'
		}
		p[out] = b
		out++
	}
	return out, err
}

var eventReaders = sync.Pool{New: func() any { return &eventReader{r: bufio.NewReaderSize(nil, 16<<10)} }}

func newEventReader(body io.Reader) *eventReader {
	e := eventReaders.Get().(*eventReader)
	e.ends = lineEnds{r: body}
	e.r.Reset(&e.ends)
	return e
}

// release returns the reader to the pool; data returned by next is
// invalid afterwards. Readers that held a very large event are dropped
// rather than kept.
func (e *eventReader) release() {
	e.r.Reset(nil)
	e.ends = lineEnds{}
	if e.data.Cap() > 1<<20 {
		return
	}
	eventReaders.Put(e)
}

// next returns the data of the next message event, valid until the next
// call. It returns io.EOF at the end of the stream.
func (e *eventReader) next() ([]byte, error) {
	e.data.Reset()
	e.name = e.name[:0]
	hasData := false
	for {
		line, err := e.line()
		if err != nil {
			if err == io.EOF && hasData && e.isMessage() {
				// A stream may end without the blank line after its last
				// event; the event still counts.
				return e.data.Bytes(), nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if hasData && e.data.Len() > 0 && e.isMessage() {
				return e.data.Bytes(), nil
			}
			e.data.Reset()
			e.name = e.name[:0]
			hasData = false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if hasData {
				e.data.WriteByte('\n')
			}
			hasData = true
			e.data.Write(value)
			if e.data.Len() > maxMessageBytes {
				return nil, fmt.Errorf("%w: an event over %d bytes", ErrProtocolViolation, maxMessageBytes)
			}
		case "event":
			e.name = append(e.name[:0], value...)
		}
	}
}

func (e *eventReader) isMessage() bool {
	return len(e.name) == 0 || string(e.name) == "message"
}

// errLongLine is a backend's event stream line past maxMessageBytes, on
// the raw path (eventReader.line) and on go-sdk's (boundedLines).
var errLongLine = fmt.Errorf("%w: a line over %d bytes", ErrProtocolViolation, maxMessageBytes)

// line returns the next line without its end (LF: lineEnds made every
// end one), valid until the next call. Lines longer than the buffer are
// assembled.
func (e *eventReader) line() ([]byte, error) {
	var long []byte
	for {
		chunk, err := e.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, chunk...)
			if len(long) > maxMessageBytes {
				return nil, errLongLine
			}
			continue
		}
		if long != nil {
			long = append(long, chunk...)
			chunk = long
		}
		if err != nil && (err != io.EOF || len(chunk) == 0) {
			return nil, err
		}
		return bytes.TrimSuffix(chunk, []byte{'\n'}), nil
	}
}
