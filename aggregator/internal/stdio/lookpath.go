package stdio

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// errNotFound: the program is not found where the server would be run;
// errNotExecutable: it is there, but no one may execute it (a script not
// made executable, which "not found" once sent its author looking
// elsewhere).
var (
	errNotFound      = errors.New("its program is not found")
	errNotExecutable = errors.New("its program is not executable")
)

// programAdvice says what to do about program's error.
func programAdvice(err error) string {
	if errors.Is(err, errNotExecutable) {
		return "make it executable (chmod +x), or run it through its interpreter"
	}
	return "install it, or name it by its full path"
}

// program is the file a stdio server's command runs, found as the server
// itself would find it: a name with a slash relative to dir (the
// server's working directory), any other in the PATH of env (the
// server's own, or the aggregator's unless env sets one), each relative
// entry of it relative to dir too. The path is absolute: the process is
// started in dir, where a relative one would be looked for again.
func program(name string, env map[string]string, dir string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) && dir != "" {
			name = filepath.Join(dir, name)
		}
		if err := runnable(name); err != nil {
			return "", err
		}
		return filepath.Abs(name)
	}
	path, set := env["PATH"]
	if !set {
		path = os.Getenv("PATH")
	}
	err := errNotFound
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) && dir != "" {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		switch found := runnable(p); {
		case found == nil:
			return filepath.Abs(p)
		case errors.Is(found, errNotExecutable):
			err = found
		}
	}
	return "", err
}

// runnable is nil when path is a regular file someone may execute,
// errNotExecutable when it is one no one may, else errNotFound.
func runnable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil || !fi.Mode().IsRegular():
		return errNotFound
	case fi.Mode()&fs.ModePerm&0o111 == 0:
		return errNotExecutable
	}
	return nil
}

// maxShebang bounds the #! line read of a script: the kernel reads no
// more of it either.
const maxShebang = 256

// missingInterpreter is the interpreter a script's #! line names that is
// not found, or "": the kernel would refuse to start the script with
// "no such file or directory", though the script itself is there (a
// server written for node or python on a machine without it, the most
// common reason a newcomer's stdio server never starts). An interpreter
// named through env ("#!/usr/bin/env node") is looked for in the server's
// PATH (env, dir) as the server's own command is. A line it cannot read
// (env with options other than -S) is taken as it is.
func missingInterpreter(path string, env map[string]string, dir string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, maxShebang)
	n, _ := io.ReadFull(f, head)
	line, ok := bytes.CutPrefix(head[:n], []byte("#!"))
	if !ok {
		return ""
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return ""
	}
	interpreter := fields[0]
	if runnable(interpreter) != nil {
		return interpreter
	}
	if filepath.Base(interpreter) != "env" || len(fields) < 2 {
		return ""
	}
	named := fields[1:]
	if named[0] == "-S" {
		named = named[1:]
	}
	if len(named) == 0 || strings.HasPrefix(named[0], "-") || strings.Contains(named[0], "=") {
		return ""
	}
	if _, err := program(named[0], env, dir); err != nil {
		return named[0]
	}
	return ""
}
