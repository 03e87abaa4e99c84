package stdio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// commandTransport is go-sdk's CommandTransport, but for the lines of the
// process's stdout that are not JSON-RPC messages (a banner, a print left
// in a server): go-sdk's decoder ends the session at the first, failing
// the calls in flight, and one written at every start keeps the server
// from ever serving. They go to junk (logged, bounded, as its stderr) and
// the session goes on, as the reference SDKs' clients skip them.
type commandTransport struct {
	cmd  *exec.Cmd
	junk io.Writer
	// grace is how long the process is given to exit once its stdin is
	// closed, and then once sent SIGTERM, before it is killed.
	grace time.Duration
}

func (t commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	// Its stdout is a pipe of the bridge's own, not the command's: a
	// process the server started may hold it after the server exits,
	// which must end the session all the same (below).
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	t.cmd.Stdout = w
	stdin, err := t.cmd.StdinPipe()
	if err == nil {
		err = t.cmd.Start()
	}
	_ = w.Close()
	if err != nil {
		_ = stdout.Close()
		return nil, err
	}
	exited := make(chan error, 1)
	go func() {
		err := t.cmd.Wait()
		// What the server wrote is read, and then its stdout ends, even
		// if a child of it holds the pipe: the session, and the calls in
		// flight, end now rather than at their timeouts.
		_ = stdout.SetReadDeadline(time.Now().Add(time.Second))
		exited <- err
	}()
	lines := &jsonLines{r: bufio.NewReaderSize(endAtDeadline{stdout}, 64<<10), junk: t.junk}
	return (&mcp.IOTransport{Reader: io.NopCloser(lines), Writer: processStdin{stdin, stdout, t.cmd, exited, t.grace}}).Connect(ctx)
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

// jsonLines passes on the lines of r that may be JSON-RPC messages (a
// JSON object, a batch: an array of them) or are empty, and writes the
// others to junk. What starts as a message but is not one still ends the
// session, as a message that does not parse.
type jsonLines struct {
	r    *bufio.Reader
	junk io.Writer
	// midLine: a line is being passed on (toJunk false) or written to
	// junk.
	midLine, toJunk bool
}

func (l *jsonLines) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if !l.midLine {
			message, err := l.message()
			if err != nil {
				return 0, err
			}
			l.midLine, l.toJunk = true, !message
		}
		if _, err := l.r.Peek(1); err != nil {
			return 0, err
		}
		buffered, _ := l.r.Peek(l.r.Buffered())
		if i := bytes.IndexByte(buffered, '\n'); i >= 0 {
			buffered = buffered[:i+1]
		}
		n := len(buffered)
		if !l.toJunk {
			n = copy(p, buffered)
		} else {
			_, _ = l.junk.Write(buffered)
		}
		l.midLine = buffered[n-1] != '\n'
		_, _ = l.r.Discard(n)
		if !l.toJunk {
			return n, nil
		}
	}
}

// message reports whether the next line may be a message or is empty: its
// first byte that is not a blank opens an object, or an array whose next
// one opens an object or closes it ("[INFO] ..." is no message). One
// past the reader's buffer is not.
func (l *jsonLines) message() (bool, error) {
	array := false
	for i := 1; ; i++ {
		b, err := l.r.Peek(i)
		if errors.Is(err, bufio.ErrBufferFull) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		switch c := b[i-1]; {
		case c == ' ' || c == '\t':
		case array:
			return c == '{' || c == ']', nil
		case c == '[':
			array = true
		default:
			return c == '{' || c == '\r' || c == '\n', nil
		}
	}
}

// processStdin is the process's stdin, whose Close stops the process as
// MCP's stdio transport asks (its stdin closed, then SIGTERM, then
// SIGKILL, each after grace), then closes its stdout.
type processStdin struct {
	io.WriteCloser
	stdout *os.File
	cmd    *exec.Cmd
	// exited receives the process's exit.
	exited <-chan error
	grace  time.Duration
}

func (s processStdin) Close() error {
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
