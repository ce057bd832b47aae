package httptarget

import (
	"sync"
	"testing"
)

// A target's pooled HMAC states sign as Sign does, one request after
// another and from many goroutines at once: a state reused is reset.
func TestPooledSign(t *testing.T) {
	tg, err := New(Config{URL: "http://127.0.0.1:1/hook", Secret: []byte("s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	bodies := [][]byte{[]byte(`{"a":1}`), nil, []byte("other bytes"), []byte(`{"a":1}`)}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				b := bodies[(g+i)%len(bodies)]
				if got, want := tg.sign("1764600000", b), Sign([]byte("s3cret"), "1764600000", b); got != want {
					t.Errorf("pooled sign of %q: %s, want %s", b, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
