// Writing a request: its head, then its body with a declared length or
// chunked.

package h1

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// closes reports whether req asks for its connection to end.
func closes(req *http.Request) bool {
	return req.Close || httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close")
}

// write sends req's head and body. wrote reports whether any of it may
// have reached the server; an error of the body itself (not of the
// connection) is never errNotWritten, so it is not retried.
func (c *conn) write(req *http.Request) (wrote bool, err error) {
	c.written.n = 0
	w := c.bw
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(req.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(requestHost(req))
	w.WriteString("\r\n")
	if _, ok := req.Header["User-Agent"]; !ok {
		w.WriteString("User-Agent: Go-http-client/1.1\r\n")
	}
	if u := req.URL.User; u != nil && req.Header.Get("Authorization") == "" {
		// As the standard transport does with a URL's user information.
		pw, _ := u.Password()
		w.WriteString("Authorization: Basic ")
		w.WriteString(base64.StdEncoding.EncodeToString([]byte(u.Username() + ":" + pw)))
		w.WriteString("\r\n")
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			// Framing is this transport's; "Connection: close" is req.Close.
			continue
		}
		for _, v := range vs {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(strings.TrimSpace(v))
			w.WriteString("\r\n")
		}
	}
	if closes(req) {
		w.WriteString("Connection: close\r\n")
	}
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
			w.WriteString("Content-Length: 0\r\n")
		}
		w.WriteString("\r\n")
	case req.ContentLength > 0:
		w.WriteString("Content-Length: ")
		w.WriteString(strconv.FormatInt(req.ContentLength, 10))
		w.WriteString("\r\n\r\n")
		src := &sourceReader{r: io.LimitReader(req.Body, req.ContentLength)}
		n, err := io.Copy(w, src)
		if src.err != nil {
			return true, src.err
		}
		if err != nil {
			return c.written.n > 0, err
		}
		if n != req.ContentLength {
			return true, fmt.Errorf("h1: request body of %d bytes, %d declared", n, req.ContentLength)
		}
		if extra, _ := req.Body.Read(make([]byte, 1)); extra > 0 {
			return true, fmt.Errorf("h1: request body longer than the %d bytes declared", req.ContentLength)
		}
	default:
		// A body of unknown length goes chunked (Fallback takes these when
		// there is one).
		w.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		src := &sourceReader{r: req.Body}
		_, err := io.Copy(&chunkWriter{w: w}, src)
		if src.err != nil {
			return true, src.err
		}
		if err != nil {
			return c.written.n > 0, err
		}
		w.WriteString("0\r\n\r\n")
	}
	if err := w.Flush(); err != nil {
		// Nothing reached a connection whose first write failed.
		return c.written.n > 0, err
	}
	return true, nil
}

// sourceReader keeps the error of the request body itself, apart from the
// connection's.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// countingWriter counts the bytes of a request the connection took.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type chunkWriter struct{ w *bufio.Writer }

func (c *chunkWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.w.WriteString(strconv.FormatInt(int64(len(p)), 16))
	c.w.WriteString("\r\n")
	c.w.Write(p)
	_, err := c.w.WriteString("\r\n")
	return len(p), err
}
