package testenv

import (
	"context"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm/logger"
)

// StatementLog is a gorm logger that records every SQL statement gorm runs
// (gorm traces each statement it sends, not BEGIN/COMMIT), so tests can
// count statements per call or check that a migration changed nothing. Use
// it with db.Session(&gorm.Session{Logger: log}).
type StatementLog struct {
	mu  sync.Mutex
	sql []string
}

func (s *StatementLog) LogMode(logger.LogLevel) logger.Interface      { return s }
func (s *StatementLog) Info(context.Context, string, ...interface{})  {}
func (s *StatementLog) Warn(context.Context, string, ...interface{})  {}
func (s *StatementLog) Error(context.Context, string, ...interface{}) {}

// Trace records one statement.
func (s *StatementLog) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	q, _ := fc()
	s.mu.Lock()
	s.sql = append(s.sql, q)
	s.mu.Unlock()
}

// Take returns the statements logged since the last Take and forgets them.
func (s *StatementLog) Take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sql
	s.sql = nil
	return out
}

// Verbs returns the first word of each statement, upper-cased.
func Verbs(stmts []string) []string {
	out := make([]string, len(stmts))
	for i, q := range stmts {
		out[i] = strings.ToUpper(strings.Fields(q)[0])
	}
	return out
}
