package bench

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A /proc/<pid>/stat line gives utime + stime, whatever the command name
// holds; a line cut short gives "unknown".
func TestStatCPU(t *testing.T) {
	line := "3827 (my (odd) d) S 1 3827 3827 0 -1 4194624 9001 0 12 0 250 75 0 0 20 0 39 0 1187 1749000192 53861 18446744073709551615"
	if got, want := statCPU(line), 325*clockTick; got != want {
		t.Errorf("statCPU = %v, want %v", got, want)
	}
	if got := statCPU("3827 (mariadbd) S 1 3827"); got != -1 {
		t.Errorf("short line: %v, want -1", got)
	}
}

// Only sockets in LISTEN on the port count.
func TestParseTCPListeners(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   101        0 21000 1 0000000000000000 100 0 0 10 0
   1: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 22000 1 0000000000000000 100 0 0 10 0
   2: 0100007F:0CEA 0100007F:A0B2 01 00000000:00000000 00:00000000 00000000   101        0 23000 1 0000000000000000 20 4 30 10 -1
`
	got := parseTCPListeners(bufio.NewScanner(strings.NewReader(table)), 3306)
	if len(got) != 1 || !got["21000"] {
		t.Errorf("listeners on 3306: %v, want inode 21000 only", got)
	}
}

// The process listening on a local TCP port or unix socket is found (here,
// this one), a remote host's is not looked for, and its CPU time reads.
func TestListeningProc(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp: not Linux")
	}
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := listeningProc(ctx, "tcp", ln.Addr().String())
	if p.pid != os.Getpid() || p.cpu() <= 0 {
		t.Errorf("TCP %s: %+v (CPU %v), want this process (pid %d) and its CPU", ln.Addr(), p, p.cpu(), os.Getpid())
	}

	path := filepath.Join(t.TempDir(), "s.sock")
	uln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	if p := listeningProc(ctx, "unix", path); p.pid != os.Getpid() {
		t.Errorf("unix %s: %+v, want this process (pid %d)", path, p, os.Getpid())
	}

	// 192.0.2.1 is TEST-NET-1: never this host's.
	if p := listeningProc(ctx, "tcp", "192.0.2.1:"+portOf(ln.Addr())); p.found() || p.cpu() != -1 {
		t.Errorf("a remote host: %+v, want nothing found", p)
	}
	if p := listeningProc(ctx, "tcp", "127.0.0.1:1"); p.found() {
		t.Errorf("a port nobody listens on: %+v", p)
	}
}

func portOf(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return port
}
