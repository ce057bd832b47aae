package httpjson

import (
	"io"
	"net/http"
	"strings"
)

// DiscardLimit bounds how much of a refused request's body WriteError reads
// and throws away before answering. A client that sends its whole body
// before reading the answer (most do, without Expect: 100-continue) then
// gets its 4xx instead of a connection reset; a body larger than this is
// not worth reading, and its connection is closed after the answer.
const DiscardLimit = 8 << 20

// NoBody refuses a request that carries a body (a Content-Length above 0,
// or a chunked one) on a route that takes none: what it says would be
// silently ignored, and the client most likely meant another route.
func NoBody(r *http.Request) error {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	return BadRequest(CodeUnexpectedBody, "", "%s %s takes no body", r.Method, r.URL.Path)
}

// startedBody marks a body this package has begun to read: for a request
// with Expect: 100-continue, reading is what sends the "100 Continue".
type startedBody struct{ io.ReadCloser }

// markStarted records on r that its body is being read. Only a request
// with Expect: 100-continue needs the mark (see discardBody), and only it
// pays for the wrapper.
func markStarted(r *http.Request) {
	if !expectsContinue(r) {
		return
	}
	if _, ok := r.Body.(*startedBody); !ok && r.Body != nil {
		r.Body = &startedBody{r.Body}
	}
}

// discardBody reads and drops what is left of r's body, up to
// DiscardLimit. It does not touch a body the client has not sent yet: with
// Expect: 100-continue and nothing read, the client waits for our word, and
// reading would be that word; the answer tells it not to send.
func discardBody(r *http.Request) {
	if r == nil || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || r.ContentLength > DiscardLimit {
		return
	}
	if _, started := r.Body.(*startedBody); !started && expectsContinue(r) {
		return
	}
	_, _ = io.CopyN(io.Discard, r.Body, DiscardLimit)
}

func expectsContinue(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(r.Header.Get("Expect")), "100-continue")
}
