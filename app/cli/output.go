package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// emit prints v as indented JSON with --json, else calls table to print it
// for people.
func (a *app) emit(v any, table func(w io.Writer)) error {
	if a.json {
		enc := json.NewEncoder(a.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// row prints tab-separated cells as one table row. A cell's control
// characters (a tab or a newline in an error message, an escape sequence in
// a payload) are shown escaped: they would break the table or drive the
// terminal.
func row(w io.Writer, cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = printable(fmt.Sprint(c))
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

// ms formats a Unix ms time for people ("-" for none).
func ms(t int64) string {
	if t <= 0 {
		return "-"
	}
	return time.UnixMilli(t).UTC().Format("2006-01-02 15:04:05.000Z")
}

// printable returns s with its control characters and invalid UTF-8
// escaped the way Go quotes strings ("\n", "\x1b"), the rest as it is.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
