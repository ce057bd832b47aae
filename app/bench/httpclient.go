package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// rawClient is one keep-alive HTTP/1.1 connection that sends one request
// at a time and reads the answer with as little work as possible. The
// server is the thing measured: net/http's client, with two goroutines per
// connection and a channel hand-off per request, would take about as much
// CPU as the server on the same two cores. It speaks just enough HTTP for
// the API's answers: Content-Length or chunked bodies, and Connection:
// close.
type rawClient struct {
	addr string
	conn net.Conn
	r    *bufio.Reader
	head []byte // the request line and headers up to Content-Length's value
	buf  []byte
}

func newRawClient(addr, path string) *rawClient {
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr +
		"\r\nUser-Agent: delayq-bench\r\nContent-Type: application/json\r\nContent-Length: "
	return &rawClient{addr: addr, head: []byte(head)}
}

// errAnswer is a malformed answer: the connection is dropped.
var errAnswer = errors.New("malformed HTTP answer")

// post sends body and returns the answer's status code. A connection the
// server closed before the request went out is redialled once.
func (c *rawClient) post(ctx context.Context, body []byte) (int, error) {
	for attempt := 0; ; attempt++ {
		fresh := c.conn == nil
		if fresh {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", c.addr)
			if err != nil {
				return 0, err
			}
			c.conn, c.r = conn, bufio.NewReaderSize(conn, 4096)
		}
		code, err := c.roundTrip(ctx, body)
		if err == nil {
			return code, nil
		}
		c.close()
		if fresh || attempt > 0 || !errors.Is(err, io.EOF) {
			return 0, err
		}
	}
}

func (c *rawClient) roundTrip(ctx context.Context, body []byte) (int, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.conn.SetDeadline(dl)
	} else {
		_ = c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	c.buf = append(c.buf[:0], c.head...)
	c.buf = strconv.AppendInt(c.buf, int64(len(body)), 10)
	c.buf = append(c.buf, "\r\n\r\n"...)
	c.buf = append(c.buf, body...)
	if _, err := c.conn.Write(c.buf); err != nil {
		return 0, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	// "HTTP/1.1 202 Accepted\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, fmt.Errorf("%w: status line %q", errAnswer, line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("%w: status line %q", errAnswer, line)
	}
	length, chunked, closing := -1, false, false
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		k, v, _ := bytes.Cut(h, []byte(":"))
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(v)); err != nil {
				return 0, fmt.Errorf("%w: Content-Length %q", errAnswer, v)
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(v, []byte("chunked"))
		case bytes.EqualFold(k, []byte("Connection")):
			closing = bytes.EqualFold(v, []byte("close"))
		}
	}
	switch {
	case chunked:
		err = c.skipChunks()
	case length >= 0:
		_, err = c.r.Discard(length)
	default:
		closing = true // the body runs to the end of the connection
	}
	if err != nil {
		return 0, err
	}
	if closing {
		c.close()
	}
	return code, nil
}

// skipChunks reads a chunked body to its end.
func (c *rawClient) skipChunks() error {
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		sizeText, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		size, err := strconv.ParseInt(string(sizeText), 16, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("%w: chunk size %q", errAnswer, line)
		}
		if _, err := c.r.Discard(int(size) + 2); err != nil { // the chunk and its CRLF
			return err
		}
		if size == 0 {
			return nil // no trailers from this server: the CRLF above ended it
		}
	}
}

func (c *rawClient) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn, c.r = nil, nil
	}
}
