package sidecar

import (
	"errors"
	"net"
	"syscall"
)

// hungUp reports a connection whose peer closed or reset it, looking at
// the socket without taking any of its bytes: a request sent meanwhile
// stays for the connection's reader, and a connection with one pending
// reads as not hung up. A connection that is no socket never reads as
// hung up.
func hungUp(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	var b [1]byte
	err = rc.Control(func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			gone = n == 0 // the peer's FIN
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
		default:
			gone = true // reset, or otherwise broken
		}
	})
	// An error: the connection is closed already.
	return gone || err != nil
}
