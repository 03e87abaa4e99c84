//go:build !linux

package stdio

import "os/exec"

// serverCommand runs the program at path with argv (argv[0] its name)
// as it is: outside Linux (a developer's macOS) there is no launcher,
// and a stdio server runs with the aggregator's user and privileges, and
// can read its environment as any process of that user can (ps eww).
func serverCommand(path string, argv []string) *exec.Cmd {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	return cmd
}

// HideFromServers does nothing outside Linux (see serverCommand).
func HideFromServers() error { return nil }
