package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
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
