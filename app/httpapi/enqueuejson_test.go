package httpapi

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/httpjson"
)

// generalEnqueue is EnqueueRequest without its DecodeFast, so httpjson.Value
// takes the general path: the reference the fast decoder must match.
type generalEnqueue EnqueueRequest

// fastBodies are bodies the fast decoder takes: the shapes clients send.
var fastBodies = []string{
	`{"id":"order_close:123","payload":{"order_no":"202611300001","user":42},"delay_ms":1800000}`,
	`{"id":"a","payload":[1,-2.5e3,"x\"\u00e9",true,false,null,{}],"run_at":1764590400000,"max_attempts":3}`,
	` { "id" : "ünïcode ✓" , "payload_base64" : "AAE=" } ` + "\n",
	`{"id":"a","payload":null}`,
	`{"id":"a","delay_ms":-0,"payload":"text"}`,
	`{}`,
}

// generalBodies are bodies the fast decoder leaves to the general path:
// errors, and valid bodies it does not handle.
var generalBodies = []string{
	`{"id":"a\u0062"}`, `{"id":"a","id":"b"}`, `{"ID":"a"}`, `{"id":"a","dealy_ms":5}`,
	`{"id":"a","delay_ms":1.0}`, `{"id":"a","delay_ms":1e3}`, `{"id":"a","delay_ms":"5"}`,
	`{"id":"a","delay_ms":9223372036854775808}`, `{"id":"a","delay_ms":null}`, `{"id":null}`,
	`{"id":"a"} {}`, `{"id":"a",}`, `{"id":"a"`, `[]`, `null`, ``, `{"id":"\u0085"}`,
	"{\"id\":\"a\xc3\"}", "{\"id\":\"\xc2\x85\"}", `{"id":"a","payload":01}`, `{"id":"a","payload":[1,]}`,
	`{"id":"a","payload":{"k":tru}}`, `{"id":"a","payload":"\x"}`,
}

func TestEnqueueDecodeFast(t *testing.T) {
	for _, b := range fastBodies {
		var r EnqueueRequest
		if !r.DecodeFast([]byte(b)) {
			t.Errorf("%s: the fast decoder refused it", b)
		}
		checkFastDecoder(t, []byte(b))
	}
	for _, b := range generalBodies {
		var r EnqueueRequest
		if r.DecodeFast([]byte(b)) {
			t.Errorf("%s: the fast decoder took it; want the general path", b)
		}
		checkFastDecoder(t, []byte(b))
	}
}

// FuzzEnqueueDecodeFast checks the fast decoder against the general path on
// arbitrary bodies: when it takes a body, the general path accepts it too
// and decodes the same request; when it does not, it leaves nothing behind.
func FuzzEnqueueDecodeFast(f *testing.F) {
	for _, b := range append(fastBodies, generalBodies...) {
		f.Add([]byte(b))
	}
	// The enqueue fuzz corpus holds the bodies that found bugs before.
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzEnqueue", "*"))
	for _, name := range files {
		if body, ok := corpusBody(name); ok {
			f.Add(body)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkFastDecoder(t, body) })
}

func checkFastDecoder(t *testing.T, body []byte) {
	t.Helper()
	var fast EnqueueRequest
	if !fast.DecodeFast(body) {
		if !reflect.DeepEqual(fast, EnqueueRequest{}) {
			t.Fatalf("%q: refused, but left %+v", body, fast)
		}
		return
	}
	var general generalEnqueue
	if err := httpjson.Value(body, &general); err != nil {
		t.Fatalf("%q: the fast decoder took it, the general path says %v", body, err)
	}
	if !reflect.DeepEqual(fast, EnqueueRequest(general)) {
		t.Fatalf("%q: fast %+v, general %+v", body, fast, general)
	}
}

// corpusBody returns the body argument of a FuzzEnqueue corpus file
// ("go test fuzz v1", then topic, body, content type, chunked).
func corpusBody(name string) ([]byte, bool) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, false
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 3 {
		return nil, false
	}
	arg, ok := strings.CutPrefix(lines[2], "[]byte(")
	if !ok {
		return nil, false
	}
	s, err := strconv.Unquote(strings.TrimSuffix(arg, ")"))
	return []byte(s), err == nil
}
