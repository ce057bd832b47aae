package tcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// echoServer accepts connections and echoes every byte back until the test
// ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func TestForwardsBytesBothWays(t *testing.T) {
	p := New(t, echoServer(t))
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			msg := bytes.Repeat([]byte(fmt.Sprintf("conn %d;", i)), 20000) // larger than socket buffers
			go func() { _, _ = c.Write(msg) }()
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Errorf("conn %d: read back: %v", i, err)
				return
			}
			if !bytes.Equal(got, msg) {
				t.Errorf("conn %d: echoed bytes differ", i)
			}
		}()
	}
	wg.Wait()
}

func TestCutClosesOpenConnectionsAndRefusesNew(t *testing.T) {
	p := New(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(c net.Conn, r *bufio.Reader) error {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if line != "ping\n" {
			return fmt.Errorf("echo %q", line)
		}
		return nil
	}
	if err := roundTrip(c, r); err != nil {
		t.Fatalf("before Cut: %v", err)
	}

	p.Cut()
	// The open connection is closed: a read ends with EOF (or a reset), not
	// a timeout.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("read on a cut connection returned data")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("cut connection stayed open (read timed out)")
	}
	// New connections are accepted by the kernel but closed at once.
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		defer c2.Close()
		if err := roundTrip(c2, bufio.NewReader(c2)); err == nil {
			t.Fatal("a connection made while cut forwarded data")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("a connection made while cut stayed open (timed out)")
		}
	}

	p.Restore()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := roundTrip(c3, bufio.NewReader(c3)); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
}

func TestRedisThroughProxy(t *testing.T) {
	mr := miniredis.RunT(t)
	p := New(t, mr.Addr())
	rdb := redis.NewClient(&redis.Options{
		Addr:         p.Addr(),
		DialTimeout:  time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
	})
	defer rdb.Close()
	ctx := context.Background()

	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the proxy: %v", err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING through the proxy: %v", err)
	}

	p.Cut()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING through a cut proxy succeeded")
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("second PING through a cut proxy succeeded")
	}

	p.Restore()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restore: %v", err)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after Restore = %q, %v", got, err)
	}
}

func TestUnreachableTargetClosesClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := New(t, target)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("client connection stayed open though the target is unreachable")
		}
	}
}

func TestCloseStopsEverything(t *testing.T) {
	p := New(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	p.Close() // twice is fine

	if c2, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c2.Close()
		t.Fatal("the proxy still listens after Close")
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection survived Close")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a connection stayed open after Close (read timed out)")
	}
}

func TestConcurrentCutRestore(t *testing.T) {
	mr := miniredis.RunT(t)
	p := New(t, mr.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_ = rdb.Ping(ctx).Err() // errors expected while cut
			}
		}()
	}
	cuts := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; cuts++ {
		p.Cut()
		p.Restore()
	}
	cancel()
	wg.Wait()
	t.Logf("%d cuts", cuts)
	// A fresh client: the old one's pool may hold links the last Cut closed.
	fresh := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer fresh.Close()
	if err := fresh.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after the Cut/Restore storm: %v", err)
	}
}
