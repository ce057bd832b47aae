// Package sqlscript reads the SQL files delayq ships and tests with
// (migrations, deployments/mysql/schema.sql, the audit queries' doc).
package sqlscript

import "strings"

// Split cuts a script into its statements, without their semicolons:
// "--" comment lines and blank lines are dropped, and a statement ends
// with a semicolon at the end of a line (so a semicolon inside a string
// or a comment mid-line does not cut one). Text after the last semicolon
// is a statement too.
func Split(s string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		out = append(out, rest)
	}
	return out
}
