package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestImagesPrintTheirVersion: deploy/README.md says that the program of
// every image the Dockerfile builds, switchboard-<target>, prints its
// version with --version.
func TestImagesPrintTheirVersion(t *testing.T) {
	root := harness.RepoRoot(t)
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`(?m)^ENTRYPOINT \["/usr/local/bin/(switchboard-[a-z-]+)"\]`)
	programs := entry.FindAllStringSubmatch(string(dockerfile), -1)
	if len(programs) < 4 {
		t.Fatalf("the Dockerfile has %d image ENTRYPOINTs, want one per image: update this test", len(programs))
	}
	bin := harness.BinDir(t)
	for _, p := range programs {
		out, err := exec.Command(filepath.Join(bin, p[1]), "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), p[1]+" ") {
			t.Errorf("%s --version: %v\n%s", p[1], err, out)
		}
	}
}
