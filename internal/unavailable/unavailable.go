// Package unavailable tells a backend that could not answer (Redis or SQL
// refused, timed out, reset, gone, overloaded) from a bug or bad data: the
// first is a 503 the caller retries, the second a 500. Every HTTP route that
// reaches a backend, the API's and its modules' (the orders module), asks it
// the same way.
package unavailable

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// Is reports whether err means a backend could not be reached,
// did not answer in time, or was not there to answer, as opposed to a bug or
// bad data: the caller should retry later (503), and an operator should look
// at Redis or SQL, not at us. Whatever form the failure takes (refused, timed
// out, reset, closed, a pool that waited in vain, an operation's deadline,
// another server on the backend's port), wrapped by the queue, the ledger or
// a coalesced enqueue, it is a 503, never a 500.
func Is(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error // a dial, read or write that failed or timed out; net.ErrClosed
	switch {
	case errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.ENETRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.ENETDOWN),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return true
	// go-redis: a closed client or an exhausted pool, and the replies of a
	// server that is up but cannot serve: loading its AOF, a replica after a
	// failover, a cluster re-sharding or down, out of memory (noeviction).
	case errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, redis.ErrPoolExhausted),
		redis.IsLoadingError(err), redis.IsReadOnlyError(err), redis.IsClusterDownError(err),
		redis.IsTryAgainError(err), redis.IsMasterDownError(err), redis.IsMaxClientsError(err),
		redis.IsOOMError(err), redis.IsNoReplicasError(err):
		return true
	// database/sql and the MySQL driver: a dead or closed connection.
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, mysql.ErrInvalidConn):
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1040, // too many connections
			1047,                   // a Galera node out of the primary component (WSREP not ready)
			1053,                   // server shutdown in progress
			1205,                   // lock wait timeout
			1213,                   // deadlock (the ledger retries these; one that survives is load)
			2002, 2003, 2006, 2013: // cannot connect, server gone away, lost connection
			return true
		}
	}
	// What has no type to match: go-redis's unexported connection errors,
	// its complaint about a peer that does not speak RESP, and any of the
	// failures above whose chain a wrapper cut (%v): its words remain.
	return anyLeaf(err, func(e error) bool {
		msg := e.Error()
		return unavailableText(msg) || notRESP(msg)
	})
}

// ErrPartlyCommitted marks a write over several SQL servers (ledger shards)
// that failed on one after another had committed: its outcome is partly
// known, which the caller treats as unknown (the relay checks the rows).
var ErrPartlyCommitted = errors.New("committed on some shards only")

// OutcomeUnknown reports whether err is a connection lost while the call
// was in flight: the server may have received, and even committed, it.
// A refused or timed-out dial never reached the server, an error the
// server answered (too many connections, not ready, deadlock, lock wait)
// committed nothing, and a wait for a pool connection sent nothing: none
// of those is unknown.
func OutcomeUnknown(err error) bool {
	if errors.Is(err, ErrPartlyCommitted) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 2006 || me.Number == 2013 // gone away, lost connection
	}
	switch {
	case errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED):
		return true
	case errors.As(err, &op) && (op.Op == "read" || op.Op == "write"):
		return true // a read or write that failed or timed out mid-call
	}
	return anyLeaf(err, func(e error) bool {
		msg := e.Error()
		return strings.Contains(msg, "invalid connection") || strings.Contains(msg, "connection reset by peer") ||
			strings.Contains(msg, "broken pipe") || strings.Contains(msg, "unexpected EOF")
	})
}

// anyLeaf reports whether f holds for an error of err's tree that wraps no
// other: where the text of a failure is, when its type is not.
func anyLeaf(err error, f func(error) bool) bool {
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if e != nil && anyLeaf(e, f) {
				return true
			}
		}
		return false
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return anyLeaf(inner, f)
		}
	}
	return f(err)
}

// unavailableText reports whether msg is, or holds, the message of a failure
// to reach a backend.
func unavailableText(msg string) bool {
	for _, s := range [...]string{
		// The kernel's and the net package's words (Unix).
		"connection refused", "connection reset by peer", "broken pipe",
		"connection timed out", "i/o timeout", "use of closed network connection",
		"no route to host", "network is unreachable",
		// go-redis's connection errors, exported or not: a pool that gave
		// no connection, a connection that could not be used.
		"redis: client is closed", "redis: connection pool ",
		"redis: connection not available", "redis: connection is not usable",
		"redis: connection unusable", "redis: timed out trying to mark connection as unusable",
		// database/sql and the MySQL driver.
		"driver: bad connection", "sql: connection is already closed", "invalid connection",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// notRESP reports whether msg is go-redis's complaint about a reply that is
// not RESP at all: a line not ended by CRLF, or one whose first byte is no
// RESP type. Something other than Redis answered on Redis's address (Redis
// died and another server took its port, or the address is wrong): Redis is
// not there. A reply of a type the command did not expect is RESP, and a
// bug: not this.
func notRESP(msg string) bool {
	if strings.HasPrefix(msg, "redis: invalid reply: ") {
		return true
	}
	rest, ok := strings.CutPrefix(msg, "redis: can't parse ")
	if !ok {
		return false
	}
	i := strings.IndexByte(rest, '"')
	if i < 0 {
		return false
	}
	line, err := strconv.Unquote(rest[i:])
	if err != nil || line == "" {
		return false
	}
	const types = "+-$:_,#!=(*%~|>" // RESP2 and RESP3
	return strings.IndexByte(types, line[0]) < 0
}
