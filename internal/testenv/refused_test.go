//go:build unix

package testenv

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// RefusedAddr refuses connections, and no listener can take its port
// while the test runs (a port merely closed again can be).
func TestRefusedAddr(t *testing.T) {
	addr := RefusedAddr(t)
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s succeeded; want it refused", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v; want connection refused", addr, err)
		}
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "0.0.0.0"} {
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, port)); err == nil {
			ln.Close()
			t.Fatalf("listen on %s:%s succeeded: the refused port can be taken", host, port)
		}
	}
}
