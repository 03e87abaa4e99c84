package hostile

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestMain removes the binaries the harness built for the tests that run
// their own cluster (harness.Start) beside the shared stack.
func TestMain(m *testing.M) { harness.Main(m) }
