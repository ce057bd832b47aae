package recoverer

import (
	"errors"
	"slices"
	"sync"
)

// history keeps the latest reports.
type history struct {
	mu      sync.Mutex
	keep    int
	reports []Report // oldest first
}

func (h *history) add(r Report) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, r)
	if n := len(h.reports) - h.keep; n > 0 {
		h.reports = slices.Delete(h.reports, 0, n)
	}
}

// list returns the kept reports, newest first.
func (h *history) list() []Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.reports)
	slices.Reverse(out)
	return out
}

// addError counts n errors in r, err standing for them, and keeps its message if
// there is room.
func addError(r *Report, n int, err error) {
	r.Errors += n
	r.Err = errors.Join(r.Err, err)
	if len(r.ErrorMessages) < maxErrorMessages {
		r.ErrorMessages = append(r.ErrorMessages, err.Error())
	}
}

// maxErrorMessages bounds Report.ErrorMessages.
const maxErrorMessages = 10
