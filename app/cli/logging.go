package cli

import (
	"io"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/config"
)

// newLogger builds the process's logger: JSON in production (stderr not a
// terminal), text on a terminal, unless log.format says which.
func newLogger(c config.Log, w io.Writer) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(w)
	if lvl, err := logrus.ParseLevel(c.Level); err == nil {
		l.SetLevel(lvl)
	}
	json := c.Format == "json"
	if c.Format == "auto" {
		json = !isTerminal(w)
	}
	if json {
		l.SetFormatter(&logrus.JSONFormatter{TimestampFormat: "2006-01-02T15:04:05.000Z07:00"})
	} else {
		l.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "15:04:05.000"})
	}
	return l
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
