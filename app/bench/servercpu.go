package bench

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
)

// serverProc is a database server process on this host, found by the
// address it listens on, whose CPU time a probe reads from
// /proc/<pid>/stat (Linux). The zero value is "not local, or not found".
type serverProc struct {
	pid  int
	name string // /proc/<pid>/comm, e.g. "mariadbd"
	addr string // the address it was found by
}

// found reports whether the process was found.
func (p serverProc) found() bool { return p.pid > 0 }

// describe says where a server's CPU figure comes from, for a note.
func (p serverProc) describe() string {
	return fmt.Sprintf("/proc/%d/stat of %s, the process listening on %s", p.pid, p.name, p.addr)
}

// cpu reads the process's CPU time (user + system, all its threads), or
// -1 when it cannot (the process is gone).
func (p serverProc) cpu() time.Duration {
	if !p.found() {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return -1
	}
	return statCPU(string(b))
}

// statCPU parses utime + stime out of a /proc/<pid>/stat line, or -1.
// The command name (field 2) may hold spaces and parentheses: the fields
// are counted from the last ')'.
func statCPU(stat string) time.Duration {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(utime+stime) * clockTick
}

// sqlServerProc finds the MySQL/MariaDB server of db on this host by the
// address of its DSN (TCP on a local address, or a unix socket); the zero
// serverProc for SQLite, a remote server, or a DSN it cannot read.
func sqlServerProc(ctx context.Context, db *gorm.DB) serverProc {
	d, ok := db.Dialector.(*gormmysql.Dialector)
	if !ok || d.Config == nil {
		return serverProc{}
	}
	cfg, err := mysqldriver.ParseDSN(d.Config.DSN)
	if err != nil {
		return serverProc{}
	}
	return listeningProc(ctx, cfg.Net, cfg.Addr)
}

// listeningProc finds the local process listening on addr: network "tcp"
// (host:port, the host a local address) or "unix" (a socket path).
func listeningProc(ctx context.Context, network, addr string) serverProc {
	var inodes map[string]bool
	switch network {
	case "tcp", "tcp4", "tcp6":
		host, port, err := net.SplitHostPort(addr)
		if err != nil || !localHost(ctx, host) {
			return serverProc{}
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return serverProc{}
		}
		inodes = tcpListeners(uint16(p))
	case "unix":
		inodes = unixListeners(addr)
	}
	if len(inodes) == 0 {
		return serverProc{}
	}
	pid := socketOwner(inodes)
	if pid <= 0 {
		return serverProc{}
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return serverProc{pid: pid, name: strings.TrimSpace(string(comm)), addr: addr}
}

// localHost reports whether host names this machine: a loopback name or
// address, or an address of one of its interfaces.
func localHost(ctx context.Context, host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ips := []net.IP{net.ParseIP(host)}
	if ips[0] == nil {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return false
		}
		ips = ips[:0]
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	ifaces, _ := net.InterfaceAddrs()
	for _, ip := range ips {
		if ip.IsLoopback() || ip.IsUnspecified() {
			return true
		}
		for _, a := range ifaces {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true
			}
		}
	}
	return false
}

// tcpListeners returns the inodes of the TCP sockets listening on port
// (/proc/net/tcp and tcp6, any local address).
func tcpListeners(port uint16) map[string]bool {
	out := make(map[string]bool)
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		for inode := range parseTCPListeners(bufio.NewScanner(f), port) {
			out[inode] = true
		}
		_ = f.Close()
	}
	return out
}

// parseTCPListeners reads a /proc/net/tcp table: lines of "sl local_address
// rem_address st ... inode", local_address as hex IP:port, st 0A for LISTEN.
func parseTCPListeners(sc *bufio.Scanner, port uint16) map[string]bool {
	out := make(map[string]bool)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		b, err := hex.DecodeString(hexPort)
		if err != nil || len(b) != 2 || uint16(b[0])<<8|uint16(b[1]) != port {
			continue
		}
		out[f[9]] = true
	}
	return out
}

// unixListeners returns the inodes of the unix sockets bound to path
// (/proc/net/unix: "Num RefCount Protocol Flags Type St Inode Path").
func unixListeners(path string) map[string]bool {
	out := make(map[string]bool)
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) >= 8 && fl[7] == path {
			out[fl[6]] = true
		}
	}
	return out
}

// socketOwner returns the pid of a process holding one of the socket
// inodes, or 0 (none, or not allowed to look: another user's process
// without privileges).
func socketOwner(inodes map[string]bool) int {
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0
	}
	for _, p := range procs {
		fds, err := os.ReadDir(filepath.Join(p, "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(p, "fd", fd.Name()))
			if err != nil {
				continue
			}
			inode, ok := strings.CutPrefix(link, "socket:[")
			if ok && inodes[strings.TrimSuffix(inode, "]")] {
				pid, _ := strconv.Atoi(filepath.Base(p))
				return pid
			}
		}
	}
	return 0
}
