package testenv

import (
	"bytes"
	"io"
	"os"
	"sync"

	"github.com/sirupsen/logrus"
)

// EnvTestLog, set to anything, makes QuietLogger write to stderr at debug
// level: the components' logs of a failing test, when they help.
const EnvTestLog = "DELAYQ_TEST_LOG"

// QuietLogger returns a logger that discards what it is given, so test
// output stays readable; with DELAYQ_TEST_LOG set it writes everything,
// debug included, to stderr.
func QuietLogger() *logrus.Logger {
	l := logrus.New()
	if os.Getenv(EnvTestLog) == "" {
		l.SetOutput(io.Discard)
	} else {
		l.SetOutput(os.Stderr)
		l.SetLevel(logrus.DebugLevel)
	}
	return l
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers: the log output
// or the stdout of something a test runs, which the test reads meanwhile.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
