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

// A refused dial never reached the server, and an error the server
// answered committed nothing; a connection lost mid-call may have: all
// are unavailable, only the last is of unknown outcome.
func TestOutcomeUnknown(t *testing.T) {
	_, dialErr := net.DialTimeout("tcp", testenv.RefusedAddr(t), time.Second)
	if dialErr == nil {
		t.Fatal("a dial to a refused address succeeded")
	}
	for _, c := range []struct {
		name        string
		err         error
		is, unknown bool
	}{
		{"refused dial", fmt.Errorf("ledger: schedule: %w", dialErr), true, false},
		{"lost mid-call", fmt.Errorf("ledger: schedule: %w", mysql.ErrInvalidConn), true, true},
		{"EOF", fmt.Errorf("ledger: schedule: %w", io.ErrUnexpectedEOF), true, true},
		{"lost connection (2013)", &mysql.MySQLError{Number: 2013}, true, true},
		{"deadlock (1213)", fmt.Errorf("ledger: schedule: %w", &mysql.MySQLError{Number: 1213}), true, false},
		{"not ready (1047)", &mysql.MySQLError{Number: 1047}, true, false},
		{"a bug", fmt.Errorf("ledger: schedule: bad column"), false, false},
	} {
		if got := unavailable.Is(c.err); got != c.is {
			t.Errorf("%s: Is %v, want %v", c.name, got, c.is)
		}
		if got := unavailable.OutcomeUnknown(c.err); got != c.unknown {
			t.Errorf("%s: OutcomeUnknown %v, want %v", c.name, got, c.unknown)
		}
	}
}
