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
		if executable(name) {
			return filepath.Abs(name)
		}
		if regular(name) {
			return "", errNotExecutable
		}
		return "", errNotFound
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
		if executable(p) {
			return filepath.Abs(p)
		}
		if regular(p) {
			err = errNotExecutable
		}
	}
	return "", err
}

// executable reports whether path is a regular file someone may execute.
func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&fs.ModePerm&0o111 != 0
}

// regular reports whether path is a regular file.
func regular(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
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
	if !executable(interpreter) {
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
