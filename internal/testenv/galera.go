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

// galeraStartTimeout bounds a node's start, a state transfer from a donor
// included (a test's data directory is small: a second or two).
const galeraStartTimeout = 60 * time.Second

// Galera is a MariaDB Galera cluster a test started itself: n mariadbd
// processes with data directories of their own, replicating synchronously
// (wsrep, Debian's galera-4 provider) over 127.0.0.1. Each node's root user
// has no password and may log in from localhost and 127.0.0.1.
type Galera struct {
	Nodes []*GaleraNode
}

// GaleraNode is one node of a Galera cluster: a private mariadbd (its
// DSN, Exec and Pid are MariaDB's) with a name in the cluster.
type GaleraNode struct {
	MariaDB
	Name string
}

// Kill SIGKILLs the node by its pid and waits until it is gone.
func (n *GaleraNode) Kill(t testing.TB) {
	t.Helper()
	if err := n.proc.kill(syscall.SIGKILL, killTimeout); err != nil {
		t.Fatalf("testenv: Galera node %s: %v", n.Name, err)
	}
}

// galeraProvider finds the galera-4 library.
func galeraProvider() (string, error) {
	for _, p := range []string{"/usr/lib/galera/libgalera_smm.so", "/usr/lib/galera-4/libgalera_smm.so",
		"/usr/lib64/galera-4/libgalera_smm.so", "/usr/lib/libgalera_smm.so"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("libgalera_smm.so not found (Debian: apt-get install galera-4)")
}

// StartGalera starts an n-node Galera cluster: the first node bootstraps
// it, the others join it (each receiving the first's state by rsync), and
// StartGalera returns once every node is synced in a cluster of n. Nodes
// are killed by their pids on cleanup. It skips the test when mariadbd,
// the galera-4 provider or rsync is missing (scripts/test-services.sh
// installs them).
//
// Run as root, the nodes run as the user nobody: the rsync daemon of a
// state transfer started by root switches to nobody and could not write a
// root-owned data directory.
func StartGalera(t testing.TB, n int) *Galera {
	t.Helper()
	installBin, serverBin, err := mariadbBins()
	if err != nil {
		t.Skipf("testenv: MariaDB server is not installed (%v)", err)
	}
	provider, err := galeraProvider()
	if err != nil {
		t.Skipf("testenv: Galera: %v", err)
	}
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Skipf("testenv: Galera: rsync, its state transfer, is not installed")
	}
	runAs, owner := "", -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatalf("testenv: StartGalera: user nobody: %v", err)
		}
		runAs = "nobody"
		owner, _ = strconv.Atoi(u.Uid)
	} else if u, err := user.Current(); err == nil {
		runAs = u.Username
	}
	g := &Galera{}
	t.Cleanup(func() {
		for _, node := range g.Nodes {
			if node.proc != nil {
				_ = node.proc.kill(syscall.SIGKILL, killTimeout)
			}
			if t.Failed() {
				t.Logf("testenv: Galera node %s (%s) log (tail):\n%s", node.Name, node.Addr, readFileTail(filepath.Join(node.Dir, "err.log")))
			}
			_ = os.RemoveAll(node.Dir)
		}
	})
	type ports struct{ sql, gcomm, ist, sst int }
	ps := make([]ports, n)
	var members []string
	for i := range n {
		var p [4]int
		for k := range p {
			if p[k], err = freePort(false); err != nil {
				t.Fatalf("testenv: StartGalera: free port: %v", err)
			}
		}
		ps[i] = ports{p[0], p[1], p[2], p[3]}
		members = append(members, net.JoinHostPort("127.0.0.1", strconv.Itoa(ps[i].gcomm)))
		dir, err := os.MkdirTemp("", "dqgal")
		if err != nil {
			t.Fatalf("testenv: StartGalera: %v", err)
		}
		if owner >= 0 {
			if err := os.Chown(dir, owner, -1); err != nil {
				t.Fatalf("testenv: StartGalera: %v", err)
			}
		}
		g.Nodes = append(g.Nodes, &GaleraNode{Name: fmt.Sprintf("g%d", i), MariaDB: MariaDB{Dir: dir, Socket: filepath.Join(dir, "s"),
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ps[i].sql))}})
	}
	gcomm := "gcomm://" + strings.Join(members, ",")
	for i, node := range g.Nodes {
		data := filepath.Join(node.Dir, "data")
		if i == 0 {
			if err := installDataDir(installBin, node.Dir, data, runAs); err != nil {
				t.Fatalf("testenv: StartGalera: %v", err)
			}
		} else {
			// A joiner starts empty: the state transfer fills it.
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatalf("testenv: StartGalera: %v", err)
			}
			if owner >= 0 {
				if err := os.Chown(data, owner, -1); err != nil {
					t.Fatalf("testenv: StartGalera: %v", err)
				}
			}
		}
		p := ps[i]
		args := []string{
			"--no-defaults", "--datadir=" + data, "--socket=" + node.Socket, "--port=" + strconv.Itoa(p.sql),
			"--bind-address=127.0.0.1", "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
			"--max-connections=200", "--log-error=" + filepath.Join(node.Dir, "err.log"),
			"--pid-file=" + filepath.Join(node.Dir, "mariadbd.pid"),
			// What Galera needs (deployments/mysql/galera.cnf has the same).
			"--binlog-format=ROW", "--default-storage-engine=InnoDB", "--innodb-autoinc-lock-mode=2",
			"--wsrep-on=ON", "--wsrep-provider=" + provider, "--wsrep-cluster-name=delayq-test",
			"--wsrep-cluster-address=" + gcomm, "--wsrep-node-name=" + node.Name,
			"--wsrep-node-address=127.0.0.1:" + strconv.Itoa(p.gcomm),
			"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:" + strconv.Itoa(p.gcomm) +
				";ist.recv_addr=127.0.0.1:" + strconv.Itoa(p.ist) + ";gcache.size=64M",
			"--wsrep-sst-method=rsync", "--wsrep-sst-receive-address=127.0.0.1:" + strconv.Itoa(p.sst),
		}
		if runAs != "" {
			args = append(args, "--user="+runAs)
		}
		if i == 0 {
			args = append(args, "--wsrep-new-cluster")
		}
		if node.proc, err = startProc(serverBin, args, node.Dir, filepath.Join(node.Dir, "stdout.log")); err != nil {
			t.Fatalf("testenv: StartGalera: %v", err)
		}
		if i == 0 {
			// The joiners need a primary component to join.
			if err := node.waitSynced(1); err != nil {
				t.Fatalf("testenv: StartGalera: %v", err)
			}
		}
	}
	for _, node := range g.Nodes {
		if err := node.waitSynced(n); err != nil {
			t.Fatalf("testenv: StartGalera: %v", err)
		}
	}
	return g
}

// waitSynced polls the node until it is ready (wsrep_ready ON) in a
// cluster of at least size nodes, or it exits, or galeraStartTimeout
// passes.
func (n *GaleraNode) waitSynced(size int) error {
	db, err := sql.Open("mysql", "root@unix("+n.Socket+")/?timeout=2s")
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(galeraStartTimeout)
	for {
		if n.proc.exited() {
			return fmt.Errorf("Galera node %s exited during start-up (%v); err.log (tail):\n%s",
				n.Name, n.proc.err, readFileTail(filepath.Join(n.Dir, "err.log")))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var ready string
		var got int
		err := db.QueryRowContext(ctx, "SELECT MAX(IF(VARIABLE_NAME = 'WSREP_READY', VARIABLE_VALUE, NULL)), "+
			"MAX(IF(VARIABLE_NAME = 'WSREP_CLUSTER_SIZE', VARIABLE_VALUE + 0, NULL)) FROM information_schema.GLOBAL_STATUS "+
			"WHERE VARIABLE_NAME IN ('WSREP_READY', 'WSREP_CLUSTER_SIZE')").Scan(&ready, &got)
		cancel()
		if err == nil {
			if ready == "ON" && got >= size {
				return nil
			}
			err = fmt.Errorf("wsrep_ready %s, cluster size %d", ready, got)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Galera node %s (pid %d) not synced in a cluster of %d within %v: %v",
				n.Name, n.Pid(), size, galeraStartTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
