// Package tcpproxy is a small TCP proxy for fault tests: put it between a
// client and a server (Redis, MySQL), then Cut the link to simulate a
// network failure and Restore it to simulate recovery.
package tcpproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// dialTimeout bounds connecting to the target for one accepted connection.
const dialTimeout = 5 * time.Second

// Proxy forwards TCP connections from a loopback listener to a target
// address. Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{} // open connections, both sides of each link
	wg     sync.WaitGroup        // the accept loop and every link's goroutines
}

// New starts a proxy listening on 127.0.0.1:0 that forwards every
// connection to target. It is closed on t.Cleanup.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tcpproxy: listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the address clients connect to, 127.0.0.1:<port>.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every current connection (both sides) and, until Restore,
// closes each new connection as soon as it is accepted. When Cut returns,
// no byte passes the proxy any more.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.closeConnsLocked()
}

// Restore makes the proxy accept and forward new connections again.
// Connections cut earlier stay closed; clients must reconnect.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close stops listening, closes every connection and waits until all of
// the proxy's goroutines have returned. It may be called more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		_ = p.ln.Close()
		p.closeConnsLocked()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// closeConnsLocked closes and forgets every tracked connection. p.mu is
// held.
func (p *Proxy) closeConnsLocked() {
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// track registers conns as open, or closes them and reports false when the
// proxy is cut or closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// live reports whether c is still tracked, i.e. no Cut or Close happened
// since it was registered.
func (p *Proxy) live(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.conns[c]
	return ok
}

// forget closes c and stops tracking it.
func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = c.Close()
	delete(p.conns, c)
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// A transient accept error (EMFILE, ECONNABORTED): back off a little.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !p.track(client) {
			continue
		}
		p.wg.Add(1)
		go p.link(client)
	}
}

// link connects client to the target and copies bytes both ways until
// either side closes or the proxy cuts the link.
func (p *Proxy) link(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		p.forget(client)
		return
	}
	// A Cut during the dial already closed client; do not forward then.
	if !p.live(client) || !p.track(server) {
		_ = server.Close()
		p.forget(client)
		return
	}
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			p.forget(client)
			p.forget(server)
		})
	}
	var copies sync.WaitGroup
	copies.Add(2)
	go func() {
		defer copies.Done()
		_, _ = io.Copy(server, client)
		closeBoth()
	}()
	go func() {
		defer copies.Done()
		_, _ = io.Copy(client, server)
		closeBoth()
	}()
	copies.Wait()
}
