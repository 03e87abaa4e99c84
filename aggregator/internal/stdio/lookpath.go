package stdio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// errNotFound: the program is not found where the server would be run.
var errNotFound = errors.New("its program is not found")

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
		return "", errNotFound
	}
	path, set := env["PATH"]
	if !set {
		path = os.Getenv("PATH")
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) && dir != "" {
			d = filepath.Join(dir, d)
		}
		if p := filepath.Join(d, name); executable(p) {
			return filepath.Abs(p)
		}
	}
	return "", errNotFound
}

// executable reports whether path is a regular file someone may execute.
func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&fs.ModePerm&0o111 != 0
}
