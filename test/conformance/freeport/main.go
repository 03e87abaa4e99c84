// Command freeport prints N free TCP ports on the loopback interface, one a
// line. The conformance runner uses it to give the services of a
// Switchboard stack addresses that nothing else on a shared machine uses.
//
// All N listeners are held open until every port is chosen, so the ports
// are distinct; they are released on exit, and the caller binds them soon
// after. That leaves a small window in which another process could take
// one: the services then fail to start, loudly, and a rerun picks others.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
)

func main() {
	flag.Usage = func() { fmt.Fprintln(os.Stderr, "usage: freeport N") }
	flag.Parse()
	n, err := strconv.Atoi(flag.Arg(0))
	if flag.NArg() != 1 || err != nil || n < 1 {
		flag.Usage()
		os.Exit(2)
	}
	var listeners []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "freeport:", err)
			os.Exit(1)
		}
		listeners = append(listeners, ln)
	}
	for _, ln := range listeners {
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
}
