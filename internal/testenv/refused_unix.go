//go:build unix

package testenv

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// RefusedAddr returns a TCP address on 127.0.0.1 that refuses every
// connection until the test ends: a server that is down.
//
// A port found free and closed again (Listen, then Close) does not stay
// free: the kernel hands it to the next listener that asks for any port,
// another test's httptest server or redis-server or another process's, and
// a dial then reaches whatever took it (a "Redis down" test saw an HTTP
// server answer its HELLO). So RefusedAddr keeps the port: a socket bound
// to it, without SO_REUSEADDR, that never listens. Connections to it are
// refused, and no listener, on that address or on any, can bind it.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	// ForkLock: a child forked between socket and CloseOnExec would keep
	// the port after the test (as the net package does where it has no
	// SOCK_CLOEXEC).
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatalf("testenv: RefusedAddr: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("testenv: RefusedAddr: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("testenv: RefusedAddr: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("testenv: RefusedAddr: bound to %T, want an IPv4 address", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
}
