//go:build linux

package h1

import (
	"net"
	"syscall"
)

// idleAndOpen reports whether an idle connection is still open and has
// nothing to read: a peek that does not wait finds no data and no end of
// stream. One system call, instead of a goroutine blocked in a read on
// every idle connection, which is how the standard transport notices.
func idleAndOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing to read and not closed. n > 0: bytes nobody
		// asked for; n == 0: the server closed it.
		open = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}
