package config

import (
	"strings"
	"testing"
)

// TestStdioBackendIsValid: a command with its environment and directory is
// a backend of its own kind, with the defaults of any backend.
func TestStdioBackendIsValid(t *testing.T) {
	b := Backend{Name: "files", Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"},
		Env: map[string]string{"API_KEY": "k"}, Dir: "/srv"}.WithDefaults()
	if err := b.Validate("aggregator.backends[0]"); err != nil {
		t.Fatal(err)
	}
	if b.Protocol != ProtocolAuto || b.Timeout == 0 {
		t.Fatalf("defaults: %+v", b)
	}
}

// A NUL byte in a stdio server's environment, arguments or directory is
// refused at load, by key: no process can be started with one, and the
// server was started again, and failed, for as long as the aggregator ran.
func TestStdioBackendRefusesNUL(t *testing.T) {
	for key, b := range map[string]Backend{
		"aggregator.backends[0].env.TOKEN":  {Name: "s", Command: []string{"server"}, Env: map[string]string{"TOKEN": "a\x00b"}},
		"aggregator.backends[0].command[1]": {Name: "s", Command: []string{"server", "--flag=a\x00b"}},
		"aggregator.backends[0].dir":        {Name: "s", Command: []string{"server"}, Dir: "/srv\x00x"},
	} {
		err := b.WithDefaults().Validate("aggregator.backends[0]")
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "NUL") {
			t.Errorf("%s: %v", key, err)
		}
	}
}
