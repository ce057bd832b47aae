package bench

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/delayq/delayq/jobs/httptarget"
)

// The receiver counts a signed request as the job's arrival, with its
// lateness against Delayq-Due-At, and answers 200; a request with a bad
// signature or no due time is refused and counted as a failure, not as a
// delivery.
func TestReceiver(t *testing.T) {
	tr := newTracker(3, true, true, 0)
	var f failures
	h := receiver(tr, &f)
	send := func(id, due, sig string) int {
		body := `{"k":1}`
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
		req.Header.Set(httptarget.HeaderJobID, id)
		req.Header.Set(httptarget.HeaderDueAt, due)
		req.Header.Set(httptarget.HeaderTimestamp, "1764600000")
		if sig == "" {
			sig = httptarget.Sign(targetSecret, "1764600000", []byte(body))
		}
		req.Header.Set(httptarget.HeaderSignature, sig)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	past := strconv.FormatInt(1764600000000, 10)
	if code := send("j0", past, ""); code != http.StatusOK {
		t.Errorf("signed request: %d, want 200", code)
	}
	if code := send("j0", past, ""); code != http.StatusOK {
		t.Errorf("the same job again: %d, want 200", code)
	}
	if code := send("j1", past, "v1=00"); code != http.StatusUnauthorized {
		t.Errorf("bad signature: %d, want 401", code)
	}
	if code := send("j2", "soon", ""); code != http.StatusBadRequest {
		t.Errorf("no due time: %d, want 400", code)
	}
	var r Result
	tr.tally(&r)
	f.into(&r)
	if r.Handled != 1 || r.Duplicates != 1 || r.Missing != 2 || r.Early != 0 || r.Failed != 2 ||
		r.FailedBy["receiver: bad signature"] != 1 || r.FailedBy["receiver: no due time or body"] != 1 {
		t.Errorf("result %+v: want j0 once plus a duplicate, j1 and j2 refused as failures", r)
	}
	if late := tr.lateness(); len(late) != 1 || late[0] <= 0 {
		t.Errorf("lateness %v: want one value, positive (the due time is long past)", late)
	}
}
