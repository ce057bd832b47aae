package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// PKI is a throwaway certificate authority and two certificates it signed,
// made at test time and written as PEM files into a t.TempDir() of their
// own (nothing of it is ever committed). Keys are ECDSA P-256.
type PKI struct {
	Dir    string
	CAFile string // the CA's certificate: what a client trusts
	// ServerCertFile and ServerKeyFile are for 127.0.0.1, ::1, localhost
	// and ServerName.
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate
	// (CN "delayq-client"), for servers that ask for one.
	ClientCertFile, ClientKeyFile string
	// ServerName is the DNS name in the server certificate besides
	// localhost; it does not resolve.
	ServerName string
}

// PKIServerName is the extra DNS name of every PKI's server certificate.
const PKIServerName = "delayq-test.invalid"

// NewPKI makes a CA, a server and a client certificate in a new
// t.TempDir(). Two calls make two unrelated CAs: one's CAFile does not
// verify the other's certificates.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{Dir: t.TempDir(), ServerName: PKIServerName}
	p.CAFile = filepath.Join(p.Dir, "ca.pem")
	p.ServerCertFile, p.ServerKeyFile = filepath.Join(p.Dir, "server.pem"), filepath.Join(p.Dir, "server.key")
	p.ClientCertFile, p.ClientKeyFile = filepath.Join(p.Dir, "client.pem"), filepath.Join(p.Dir, "client.key")
	if err := p.generate(); err != nil {
		t.Fatalf("testenv: NewPKI: %v", err)
	}
	return p
}

func (p *PKI) generate() error {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "delayq test CA " + strconv.FormatInt(now.UnixNano(), 36)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePEM(p.CAFile, "CERTIFICATE", caDER); err != nil {
		return err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			DNSNames:     dns,
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyFile, "PRIVATE KEY", keyDER)
	}
	if err := leaf(2, "delayq-test-server", x509.ExtKeyUsageServerAuth, []string{"localhost", p.ServerName},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, p.ServerCertFile, p.ServerKeyFile); err != nil {
		return err
	}
	return leaf(3, "delayq-client", x509.ExtKeyUsageClientAuth, nil, nil, p.ClientCertFile, p.ClientKeyFile)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// ClientTLS returns a client TLS configuration that trusts the PKI's CA and
// presents its client certificate.
func (p *PKI) ClientTLS() *tls.Config {
	c := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	// NewPKI wrote and checked these files; should they be gone, the
	// configuration trusts nothing and every handshake fails, loudly.
	if caPEM, err := os.ReadFile(p.CAFile); err == nil {
		c.RootCAs.AppendCertsFromPEM(caPEM)
	}
	if pair, err := tls.LoadX509KeyPair(p.ClientCertFile, p.ClientKeyFile); err == nil {
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}

// testProc is a server process a test started itself: in a process group
// of its own, killed by its pid on cleanup.
type testProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProc starts bin with args in dir, output appended to logFile.
func startProc(bin string, args []string, dir, logFile string) (*testProc, error) {
	logf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	err = startCmd(cmd)
	_ = logf.Close()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &testProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *testProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig to the process (by its pid), waits up to timeout for it to
// exit, then SIGKILLs it and what is left of its process group.
func (p *testProc) stop(sig syscall.Signal, timeout time.Duration) {
	pid := p.cmd.Process.Pid
	if !p.exited() {
		_ = p.cmd.Process.Signal(sig)
		select {
		case <-p.done:
		case <-time.After(timeout):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// readFileTail returns the last few KB of a log file.
func readFileTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// TLSRedisOptions configures StartRedisTLS.
type TLSRedisOptions struct {
	// PKI signs the server's certificate; required.
	PKI *PKI
	// Password, if set, is the server's requirepass.
	Password string
	// ClientCerts makes the server demand a client certificate signed by
	// the PKI (tls-auth-clients yes); otherwise it asks for none.
	ClientCerts bool
	// Users are ACL rules, one user each, passed as --user, e.g.
	// "app on >secret ~app:* &app:* +@all".
	Users []string
}

// TLSRedis is a redis-server a test started itself that speaks only TLS.
type TLSRedis struct {
	Addr string // 127.0.0.1:<tls port>
	Dir  string // its working directory: redis.log
	proc *testProc
}

// Pid is the server's process id.
func (s *TLSRedis) Pid() int { return s.proc.cmd.Process.Pid }

// Kill sends SIGKILL to the server's pid and waits until it has exited.
func (s *TLSRedis) Kill() { s.proc.stop(syscall.SIGKILL, killTimeout) }

// StartRedisTLS starts redis-server on a free 127.0.0.1 port with TLS only
// (--port 0, --tls-port), the PKI's server certificate and, if set, a
// password; waits (bounded) until it answers PING over TLS; and kills it by
// its pid on cleanup. It skips the test when redis-server is not installed
// or was built without TLS.
func StartRedisTLS(t testing.TB, opts TLSRedisOptions) *TLSRedis {
	t.Helper()
	if opts.PKI == nil {
		t.Fatal("testenv: StartRedisTLS: PKI is required")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skipf("testenv: redis-server is not installed (%v); scripts/test-services.sh installs it", err)
	}
	s := &TLSRedis{Dir: t.TempDir()}
	logFile := filepath.Join(s.Dir, "redis.log")
	t.Cleanup(func() {
		if s.proc != nil {
			s.proc.stop(syscall.SIGKILL, killTimeout)
		}
		if t.Failed() {
			t.Logf("testenv: TLS redis-server %s log (tail):\n%s", s.Addr, readFileTail(logFile))
		}
	})
	authClients := "no"
	if opts.ClientCerts {
		authClients = "yes"
	}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort(false)
		if err != nil {
			t.Fatalf("testenv: StartRedisTLS: free port: %v", err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args := []string{
			"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--protected-mode", "no", "--daemonize", "no", "--dir", s.Dir, "--save", "", "--appendonly", "no",
			"--tls-cert-file", opts.PKI.ServerCertFile, "--tls-key-file", opts.PKI.ServerKeyFile,
			"--tls-ca-cert-file", opts.PKI.CAFile, "--tls-auth-clients", authClients,
		}
		if opts.Password != "" {
			args = append(args, "--requirepass", opts.Password)
		}
		for _, u := range opts.Users {
			// The directive's words as arguments of their own: redis-server
			// takes "--user a b c" as the line "user a b c".
			args = append(append(args, "--user"), strings.Fields(u)...)
		}
		logOff := fileSize(logFile)
		s.proc, err = startProc(bin, args, s.Dir, logFile)
		if err != nil {
			t.Fatalf("testenv: StartRedisTLS: %v", err)
		}
		if lastErr = s.waitReady(opts); lastErr == nil {
			return s
		}
		s.proc.stop(syscall.SIGKILL, killTimeout)
		log := readFrom(logFile, logOff)
		if strings.Contains(log, "Bad directive") && strings.Contains(log, "'tls-port") ||
			strings.Contains(log, "TLS") && strings.Contains(log, "not supported") {
			t.Skipf("testenv: redis-server was built without TLS:\n%s", log)
		}
		if !strings.Contains(log, "Address already in use") {
			break
		}
	}
	t.Fatalf("testenv: StartRedisTLS: %v\nlog (tail):\n%s", lastErr, readFileTail(logFile))
	return nil
}

// waitReady polls until the process answers PING over TLS with the PKI's
// client configuration and its INFO shows its pid, or it exits, or
// startTimeout passes.
func (s *TLSRedis) waitReady(opts TLSRedisOptions) error {
	rdb := redis.NewClient(&redis.Options{
		Addr: s.Addr, Password: opts.Password, TLSConfig: opts.PKI.ClientTLS(),
		MaxRetries: -1, DialerRetries: 1, DialTimeout: 500 * time.Millisecond, ReadTimeout: 2 * time.Second, PoolSize: 1,
	})
	defer rdb.Close()
	pid := strconv.Itoa(s.Pid())
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for {
		if s.proc.exited() {
			return fmt.Errorf("redis-server on %s exited during start-up (%v)", s.Addr, s.proc.err)
		}
		var info string
		c, err := net.DialTimeout("tcp", s.Addr, 500*time.Millisecond)
		if err == nil {
			_ = c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			info, err = rdb.Info(ctx, "server").Result()
			cancel()
		}
		if err == nil {
			if strings.Contains(info, "\nprocess_id:"+pid+"\r") {
				return nil
			}
			err = errors.New("another redis-server answers on this port")
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s (pid %s) did not answer over TLS within %v: %v", s.Addr, pid, startTimeout, lastErr)
		}
		time.Sleep(pollInterval)
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func readFrom(path string, off int64) string {
	b, err := os.ReadFile(path)
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}
