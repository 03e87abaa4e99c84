package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// commandTransport is go-sdk's CommandTransport, but for the lines of the
// process's stdout that are not JSON-RPC messages (a banner, a print left
// in a server): go-sdk's decoder ends the session at the first, failing
// the calls in flight, and one written at every start keeps the server
// from ever serving. They go to junk (logged, bounded, as its stderr) and
// the session goes on, as the reference SDKs' clients skip them.
type commandTransport struct {
	// process is the command to start (its cmd and grace set), and once
	// started its stdin, whose Close stops it.
	process *processStdin
	junk    io.Writer
}

func (t commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	p := t.process
	// Its stdout is a pipe of the bridge's own, not the command's: a
	// process the server started may hold it after the server exits,
	// which must end the session all the same (below).
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout = w
	stdin, err := p.cmd.StdinPipe()
	if err == nil {
		err = p.cmd.Start()
	}
	_ = w.Close()
	if err != nil {
		_ = stdout.Close()
		return nil, err
	}
	exited := make(chan error, 1)
	go func() {
		err := p.cmd.Wait()
		// What the server wrote is read, and then its stdout ends, even
		// if a child of it holds the pipe: the session, and the calls in
		// flight, end now rather than at their timeouts.
		_ = stdout.SetReadDeadline(time.Now().Add(time.Second))
		exited <- err
	}()
	p.WriteCloser, p.stdout, p.exited = stdin, stdout, exited
	lines := &jsonLines{r: bufio.NewReaderSize(endAtDeadline{stdout}, 64<<10), junk: t.junk}
	return (&mcp.IOTransport{Reader: io.NopCloser(lines), Writer: p}).Connect(ctx)
}

// endAtDeadline ends the process's stdout at its deadline, set once the
// process has exited: the end of its output, not a failure to read it.
type endAtDeadline struct{ *os.File }

func (r endAtDeadline) Read(p []byte) (int, error) {
	n, err := r.File.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = io.EOF
	}
	return n, err
}

// jsonLines passes on the lines of r that are JSON-RPC messages go-sdk
// can take (one its decoder reads, or a batch: an array of them) or are
// empty, and writes the others to junk: a banner, "[INFO] ..." and also
// what looks like JSON but is no message (a structured log line, a
// Python dict printed) or a message go-sdk refuses (an error whose id is
// null, which answers no request of the client's), which once ended the
// session as a message that does not parse, so that a server writing one
// at start (or for each notification) never served. A
// line past maxMessageLine is not read whole: passed on if it starts as a
// message (go-sdk's decoder refuses it and ends the session), else junk.
type jsonLines struct {
	r    *bufio.Reader
	junk io.Writer
	// line is what is left to pass on of the line being passed on.
	line []byte
	// long marks a line past maxMessageLine going on as it comes, to
	// junk when toJunk.
	long, toJunk bool
}

// maxMessageLine is the longest line read whole to tell whether it is a
// message: go-sdk's decoder's own bound on one (DefaultMaxLineLength).
const maxMessageLine = mcp.DefaultMaxLineLength

func (l *jsonLines) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if len(l.line) > 0 {
			n := copy(p, l.line)
			l.line = l.line[n:]
			return n, nil
		}
		if l.long {
			chunk, err := l.r.ReadSlice('\n')
			if !errors.Is(err, bufio.ErrBufferFull) {
				l.long = false
				if err != nil && len(chunk) == 0 {
					return 0, err
				}
			}
			if !l.toJunk {
				l.line = chunk
				continue
			}
			_, _ = l.junk.Write(chunk)
			continue
		}
		line, complete, err := l.readLine()
		if len(line) == 0 {
			return 0, err
		}
		switch {
		case !complete:
			l.long, l.toJunk = true, !startsAsMessage(line)
			if l.toJunk {
				_, _ = l.junk.Write(line)
				continue
			}
			l.line = line
		case isMessage(line):
			l.line = line
		default:
			_, _ = l.junk.Write(line)
		}
	}
}

// readLine reads the next line whole, its newline included, or as much
// of it as maxMessageLine (complete false); at the end of r, what is left.
func (l *jsonLines) readLine() (line []byte, complete bool, err error) {
	for {
		chunk, err := l.r.ReadSlice('\n')
		line = append(line, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull) && len(line) <= maxMessageLine:
		case errors.Is(err, bufio.ErrBufferFull):
			return line, false, nil
		default:
			return line, true, err
		}
	}
}

// isMessage reports whether line is empty (blanks), a JSON-RPC message
// go-sdk can take (jsonRPC), or a batch of them.
func isMessage(line []byte) bool {
	line = bytes.TrimSpace(line)
	switch {
	case len(line) == 0:
		return true
	case line[0] == '{':
		return jsonRPC(line)
	case line[0] != '[':
		return false
	}
	var batch []json.RawMessage
	if json.Unmarshal(line, &batch) != nil || len(batch) == 0 {
		return false
	}
	for _, m := range batch {
		if !jsonRPC(m) {
			return false
		}
	}
	return true
}

// jsonRPC reports whether b is a JSON object go-sdk's decoder reads as a
// message: the same decoder the session uses, which ends the session at
// the first it refuses (a version other than "2.0", an id that is
// neither a number nor a string, a response whose id is null).
func jsonRPC(b []byte) bool {
	if !rawjson.StartsObject(b) {
		return false
	}
	_, err := jsonrpc.DecodeMessage(b)
	return err == nil
}

// startsAsMessage reports whether a line too long to read whole opens an
// object, or an array whose next byte that is not a blank opens one.
func startsAsMessage(line []byte) bool {
	line = bytes.TrimLeft(line, " \t")
	if len(line) > 0 && line[0] == '[' {
		line = bytes.TrimLeft(line[1:], " \t\r\n")
	}
	return len(line) > 0 && line[0] == '{'
}

// processStdin is the process's stdin, whose Close stops the process as
// MCP's stdio transport asks (its stdin closed, then SIGTERM, then
// SIGKILL, each after grace), then closes its stdout. Close stops it
// once, whoever asks first: the session's close, which waits for the
// calls in flight, or the bridge (stopSession), which cannot wait for
// them.
type processStdin struct {
	io.WriteCloser
	stdout *os.File
	cmd    *exec.Cmd
	// exited receives the process's exit.
	exited <-chan error
	// grace is how long the process is given to exit once its stdin is
	// closed, and then once sent SIGTERM, before it is killed.
	grace time.Duration

	once sync.Once
	err  error
}

func (s *processStdin) Close() error {
	s.once.Do(func() { s.err = s.stop() })
	return s.err
}

func (s *processStdin) stop() error {
	_ = s.WriteCloser.Close()
	defer s.stdout.Close()
	for _, stop := range []func() error{
		func() error { return s.cmd.Process.Signal(syscall.SIGTERM) },
		s.cmd.Process.Kill,
	} {
		select {
		case err := <-s.exited:
			return err
		case <-time.After(s.grace):
		}
		_ = stop()
	}
	return <-s.exited
}
