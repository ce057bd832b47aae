package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
)

// fakeRecovery records the runs asked of it and answers with a report or
// with err.
type fakeRecovery struct {
	mu      sync.Mutex
	dryRun  []bool
	err     error
	partial bool // a failed run still returns a report, as recovery.RunOnce does
}

type fakeReport struct {
	DryRun      bool `json:"dry_run"`
	Reenqueued  int  `json:"reenqueued"`
	StaleChecks int  `json:"stale_checked"`
}

func (f *fakeRecovery) Run(_ context.Context, dryRun bool) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dryRun = append(f.dryRun, dryRun)
	if f.err != nil {
		if f.partial {
			return fakeReport{DryRun: dryRun, Reenqueued: 1}, f.err
		}
		return nil, f.err
	}
	return fakeReport{DryRun: dryRun, Reenqueued: 2, StaleChecks: 5}, nil
}

func (f *fakeRecovery) Reports() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]fakeReport, len(f.dryRun))
	for i, d := range f.dryRun {
		out[i] = fakeReport{DryRun: d, Reenqueued: 2, StaleChecks: 5}
	}
	return out
}

func (f *fakeRecovery) runs() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bool(nil), f.dryRun...)
}

func (f *fakeRecovery) fail(err error, partial bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.partial = err, partial
}

func TestRecoveryRoutes(t *testing.T) {
	t.Parallel()
	rec := &fakeRecovery{}
	e := newEnv(t, embedded, withRecovery(rec))

	r := e.post(t, "/v1/recovery/run?dry_run=true", "")
	expect(t, r, http.StatusOK)
	if rep := decode[fakeReport](t, r); !rep.DryRun || rep.Reenqueued != 2 {
		t.Fatalf("dry-run report %+v", rep)
	}
	r = e.post(t, "/v1/recovery/run", "")
	expect(t, r, http.StatusOK)
	if rep := decode[fakeReport](t, r); rep.DryRun {
		t.Fatalf("run without dry_run was a dry run: %+v", rep)
	}
	expectError(t, e.post(t, "/v1/recovery/run?dry_run=maybe", ""), http.StatusBadRequest, httpapi.CodeInvalidValue, "dry_run")
	if runs := rec.runs(); fmt.Sprint(runs) != "[true false]" {
		t.Fatalf("runs %v", runs)
	}

	r = e.get(t, "/v1/recovery/reports")
	expect(t, r, http.StatusOK)
	reports := decode[struct {
		Reports []fakeReport `json:"reports"`
	}](t, r)
	if len(reports.Reports) != 2 || !reports.Reports[0].DryRun {
		t.Fatalf("reports %+v", reports)
	}
	expectError(t, e.get(t, "/v1/recovery/run"), http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed, "")

	// A backend the recoverer needs is down: 503. Anything else: 500.
	rec.fail(fmt.Errorf("recovery: stale rows: %w", syscall.ECONNREFUSED), false)
	r = e.post(t, "/v1/recovery/run", "")
	expectError(t, r, http.StatusServiceUnavailable, httpapi.CodeBackendUnavailable, "")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	rec.fail(errors.New("recovery: unexpected envelope"), false)
	expectError(t, e.post(t, "/v1/recovery/run", ""), http.StatusInternalServerError, httpapi.CodeInternal, "")

	// A run that failed part way: the error, and how far it got.
	rec.fail(fmt.Errorf("recovery: restore: %w", syscall.ECONNRESET), true)
	r = e.post(t, "/v1/recovery/run", "")
	expect(t, r, http.StatusServiceUnavailable)
	f := decode[struct {
		Error  httpapi.ErrorDetail `json:"error"`
		Report fakeReport          `json:"report"`
	}](t, r)
	if f.Error.Code != httpapi.CodeBackendUnavailable || f.Report.Reenqueued != 1 || r.header.Get("Retry-After") == "" {
		t.Fatalf("partial failure %+v", f)
	}
}

func TestRecoveryNotConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embedded)
	expectError(t, e.post(t, "/v1/recovery/run?dry_run=true", ""), http.StatusServiceUnavailable, httpapi.CodeNotConfigured, "")
	expectError(t, e.get(t, "/v1/recovery/reports"), http.StatusServiceUnavailable, httpapi.CodeNotConfigured, "")
}
