// Command freeport prints N free TCP ports on the loopback interface, one a
// line. The conformance runner uses it to give the services of a
// Switchboard stack addresses that nothing else on a shared machine uses.
//
// The ports are distinct and come from below the kernel's ephemeral range
// (ports.FreeN), so nothing listening on port 0 takes one before the
// caller binds it. Another process choosing the same port in that moment
// is still possible: the services then fail to start, loudly, and a rerun
// picks others.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/switchboard-mcp/switchboard/test/ports"
)

func main() {
	flag.Usage = func() { fmt.Fprintln(os.Stderr, "usage: freeport N") }
	flag.Parse()
	n, err := strconv.Atoi(flag.Arg(0))
	if flag.NArg() != 1 || err != nil || n < 1 {
		flag.Usage()
		os.Exit(2)
	}
	chosen, err := ports.FreeN(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "freeport:", err)
		os.Exit(1)
	}
	for _, p := range chosen {
		fmt.Println(p)
	}
}
