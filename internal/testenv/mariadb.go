package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MariaDBOptions configures StartMariaDB.
type MariaDBOptions struct {
	// PKI, if set, gives the server TLS (ssl-ca, ssl-cert, ssl-key from the
	// PKI) and require_secure_transport=ON: every TCP client must use TLS.
	PKI *PKI
}

// MariaDB is a private mariadbd a test started itself, with a data
// directory of its own, on a free 127.0.0.1 port. Its root user has no
// password and may log in from localhost (the socket) and 127.0.0.1.
type MariaDB struct {
	Addr   string // 127.0.0.1:<port>
	Dir    string // the data directory's parent: err.log, the socket
	Socket string // the unix socket, which needs no TLS
	proc   *testProc
}

// Pid is the server's process id.
func (m *MariaDB) Pid() int { return m.proc.cmd.Process.Pid }

// DSN returns a go-sql-driver/mysql DSN for user with password pass to
// database db over TCP, with params (without the "?") appended.
func (m *MariaDB) DSN(user, pass, db, params string) string {
	dsn := fmt.Sprintf("%s:%s@tcp(%s)/%s", user, pass, m.Addr, db)
	if params != "" {
		dsn += "?" + params
	}
	return dsn
}

// Exec runs statements as root over the unix socket, failing the test on
// the first error.
func (m *MariaDB) Exec(t testing.TB, stmts ...string) {
	t.Helper()
	db, err := sql.Open("mysql", "root@unix("+m.Socket+")/?timeout=5s")
	if err != nil {
		t.Fatalf("testenv: MariaDB %s: %v", m.Addr, err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("testenv: MariaDB %s: %s: %v", m.Addr, s, err)
		}
	}
}

// installDataDir initialises the data directory data (mariadb-install-db,
// run in dir, the files owned by runAs, root without a password).
func installDataDir(installBin, dir, data, runAs string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	install := exec.CommandContext(ctx, installBin, "--no-defaults", "--datadir="+data, "--user="+runAs,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")
	install.Dir = dir
	install.SysProcAttr = sysProcAttr()
	var out strings.Builder
	install.Stdout, install.Stderr = &out, &out
	err := startCmd(install)
	if err == nil {
		err = install.Wait()
	}
	if err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s", err, out.String())
	}
	return nil
}

// mariadbBins finds mariadb-install-db and mariadbd.
func mariadbBins() (install, server string, err error) {
	install, err = exec.LookPath("mariadb-install-db")
	if err != nil {
		return "", "", fmt.Errorf("mariadb-install-db: %w", err)
	}
	server, err = exec.LookPath("mariadbd")
	if err != nil {
		for _, p := range []string{"/usr/sbin/mariadbd", "/usr/libexec/mariadbd"} {
			if _, serr := os.Stat(p); serr == nil {
				return install, p, nil
			}
		}
		return "", "", fmt.Errorf("mariadbd: %w", err)
	}
	return install, server, nil
}

// StartMariaDB initialises a data directory (mariadb-install-db, root
// without a password), starts mariadbd on it on a free 127.0.0.1 port
// (with TLS as opts say), waits (bounded) until it answers on its socket,
// and kills it by its pid on cleanup. It skips the test when mariadbd or
// mariadb-install-db is not installed.
func StartMariaDB(t testing.TB, opts MariaDBOptions) *MariaDB {
	t.Helper()
	installBin, serverBin, err := mariadbBins()
	if err != nil {
		t.Skipf("testenv: MariaDB server is not installed (%v); a private server needs mariadbd and mariadb-install-db", err)
	}
	// A short directory: a unix socket path must fit in 108 bytes, and
	// t.TempDir() holds the test's name.
	dir, err := os.MkdirTemp("", "dqmdb")
	if err != nil {
		t.Fatalf("testenv: StartMariaDB: %v", err)
	}
	m := &MariaDB{Dir: dir, Socket: filepath.Join(dir, "s")}
	errLog := filepath.Join(dir, "err.log")
	t.Cleanup(func() {
		if m.proc != nil {
			_ = m.proc.kill(syscall.SIGKILL, killTimeout)
		}
		if t.Failed() {
			t.Logf("testenv: mariadbd %s log (tail):\n%s", m.Addr, readFileTail(errLog))
		}
		_ = os.RemoveAll(dir)
	})
	runAs := "root"
	if u, err := user.Current(); err == nil {
		runAs = u.Username
	}
	data := filepath.Join(dir, "data")
	if err := installDataDir(installBin, dir, data, runAs); err != nil {
		t.Fatalf("testenv: StartMariaDB: %v", err)
	}

	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort(false)
		if err != nil {
			t.Fatalf("testenv: StartMariaDB: free port: %v", err)
		}
		m.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args := []string{
			"--no-defaults", "--datadir=" + data, "--socket=" + m.Socket, "--port=" + strconv.Itoa(port),
			"--bind-address=127.0.0.1", "--user=" + runAs, "--skip-name-resolve", "--skip-log-bin",
			"--innodb-buffer-pool-size=16M", "--max-connections=100", "--log-error=" + errLog,
			"--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
		}
		if opts.PKI != nil {
			args = append(args, "--ssl-ca="+opts.PKI.CAFile, "--ssl-cert="+opts.PKI.ServerCertFile,
				"--ssl-key="+opts.PKI.ServerKeyFile, "--require-secure-transport=ON")
		}
		logOff := fileSize(errLog)
		if m.proc, err = startProc(serverBin, args, dir, filepath.Join(dir, "stdout.log")); err != nil {
			t.Fatalf("testenv: StartMariaDB: %v", err)
		}
		if lastErr = m.waitReady(port); lastErr == nil {
			return m
		}
		_ = m.proc.kill(syscall.SIGKILL, killTimeout)
		log := readFrom(errLog, logOff)
		if !strings.Contains(log, "Address already in use") && !strings.Contains(log, "another server running") {
			break
		}
	}
	t.Fatalf("testenv: StartMariaDB: %v\nerr.log (tail):\n%s", lastErr, readFileTail(errLog))
	return nil
}

// waitReady polls the socket until the server answers and says it listens
// on port (so it is this process, not another one), or it exits, or
// startTimeout passes.
func (m *MariaDB) waitReady(port int) error {
	db, err := sql.Open("mysql", "root@unix("+m.Socket+")/?timeout=1s")
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		if m.proc.exited() {
			return fmt.Errorf("mariadbd on %s exited during start-up (%v)", m.Addr, m.proc.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var got int
		err := db.QueryRowContext(ctx, "SELECT @@port").Scan(&got)
		cancel()
		if err == nil {
			if got == port {
				return nil
			}
			err = fmt.Errorf("the socket's server listens on %d, not %d", got, port)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd on %s (pid %d) did not answer within %v: %v", m.Addr, m.Pid(), startTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fileSize returns the size of the file at path, 0 when it does not exist.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
