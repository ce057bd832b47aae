package deployments_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// mysql/galera.cnf holds what Galera requires of delayq's ledger (the
// settings internal/testenv's cluster starts with), and a real mariadbd
// reads it without an unknown or malformed option.
func TestGaleraConf(t *testing.T) {
	const path = "mysql/galera.cnf"
	set := map[string]string{}
	for _, line := range strings.Split(readFile(t, path), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s: %q is not key = value", path, line)
			continue
		}
		set[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
	}
	for k, want := range map[string]string{
		"binlog_format": "ROW", "default_storage_engine": "InnoDB", "innodb_autoinc_lock_mode": "2",
		"wsrep_on": "ON", "transaction_isolation": "READ-COMMITTED",
	} {
		if set[k] != want {
			t.Errorf("%s: %s = %q, want %q", path, k, set[k], want)
		}
	}
	for _, k := range []string{"wsrep_provider", "wsrep_cluster_address", "wsrep_node_address", "wsrep_sst_method"} {
		if set[k] == "" {
			t.Errorf("%s: %s is not set", path, k)
		}
	}

	mariadbd, err := exec.LookPath("mariadbd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/mariadbd"); serr != nil {
			t.Skip("mariadbd is not installed: galera.cnf only read")
		}
		mariadbd = "/usr/sbin/mariadbd"
	}
	// --help --verbose parses every option of the file and exits: an
	// unknown variable or a bad value is an error (exit 7).
	args := []string{"--defaults-file=" + path, "--help", "--verbose"}
	if os.Geteuid() == 0 {
		args = append(args[:1], append([]string{"--user=root"}, args[1:]...)...)
	}
	out, err := run(t, ".", nil, mariadbd, args...)
	if err != nil {
		t.Fatalf("mariadbd does not accept %s: %v\n%s", path, err, lastLines(out, 10))
	}
	if !strings.Contains(out, "wsrep-provider") {
		t.Errorf("mariadbd --help --verbose lists no wsrep options: not a Galera-capable server?")
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
