package unavailable_test

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/internal/unavailable"
)

// A refused dial never reached the server; a connection lost afterwards
// may have: both are unavailable, only the first is NotSent.
func TestNotSent(t *testing.T) {
	_, dialErr := net.DialTimeout("tcp", testenv.RefusedAddr(t), time.Second)
	if dialErr == nil {
		t.Fatal("a dial to a refused address succeeded")
	}
	for _, c := range []struct {
		name          string
		err           error
		is, neverSent bool
	}{
		{"refused dial", fmt.Errorf("ledger: schedule: %w", dialErr), true, true},
		{"lost mid-call", fmt.Errorf("ledger: schedule: %w", mysql.ErrInvalidConn), true, false},
		{"EOF", fmt.Errorf("ledger: schedule: %w", io.ErrUnexpectedEOF), true, false},
		{"a bug", fmt.Errorf("ledger: schedule: bad column"), false, false},
	} {
		if got := unavailable.Is(c.err); got != c.is {
			t.Errorf("%s: Is %v, want %v", c.name, got, c.is)
		}
		if got := unavailable.NotSent(c.err); got != c.neverSent {
			t.Errorf("%s: NotSent %v, want %v", c.name, got, c.neverSent)
		}
	}
}
