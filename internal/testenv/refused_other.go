//go:build !unix

package testenv

import (
	"net"
	"testing"
)

// RefusedAddr returns a TCP address on 127.0.0.1 that nothing listens on.
// Here the port is only found free (Listen, then Close): another listener
// may take it before the test dials it. See refused_unix.go for the address
// that stays refused.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: RefusedAddr: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("testenv: RefusedAddr: %v", err)
	}
	return addr
}
