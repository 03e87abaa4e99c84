package lifecycle

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestExitAdviceForAPortInUse: a service that cannot listen because the
// address is taken says what to do.
func TestExitAdviceForAPortInUse(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	_, err = net.Listen("tcp", lis.Addr().String())
	if err == nil {
		t.Fatal("listened twice")
	}
	if got := exitAdvice(fmt.Errorf("serve: %w", err)); !strings.Contains(got, "another process listens at that address") {
		t.Fatalf("advice %q for %v", got, err)
	}
	if exitAdvice(fmt.Errorf("other")) != "" {
		t.Fatal("advice for another error")
	}
}
