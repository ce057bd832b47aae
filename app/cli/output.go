package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
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

// row prints tab-separated cells as one table row.
func row(w io.Writer, cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprint(c)
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
