package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// TestOpenAPIClientTypeScript generates a TypeScript client from the spec
// the server serves (openapi-typescript, called through openapi-fetch, at
// the versions testdata/tsclient/package-lock.json pins), type-checks and
// compiles a small program with it, and runs it with node against a live
// server: it enqueues a job and reads it back.
func TestOpenAPIClientTypeScript(t *testing.T) {
	t.Parallel()
	node, errNode := exec.LookPath("node")
	npm, errNPM := exec.LookPath("npm")
	if errNode != nil || errNPM != nil {
		t.Skip("node and npm are needed to generate and run the TypeScript client")
	}
	e := newContractEnv(t, contractUp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "tsconfig.json", "client.ts"} {
		b, err := os.ReadFile(filepath.Join("testdata", "tsclient", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(env []string, name string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %q: %v\nstdout: %s\nstderr: %s", filepath.Base(name), args, err, out, stderr.Bytes())
		}
		return out
	}
	// The lock file pins every package; scripts are not needed.
	run(nil, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")

	spec := e.raw(t, "GET", "/v1/openapi.json", "", nil)
	if spec.status != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %s", spec.status, spec.body)
	}
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), spec.body, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := func(name string) string { return filepath.Join(dir, "node_modules", ".bin", name) }
	run(nil, bin("openapi-typescript"), "openapi.json", "-o", "schema.d.ts")
	run(nil, bin("tsc"), "--noEmit", "-p", ".")
	run(nil, bin("tsc"), "-p", ".")

	const topic, id = "ts", "ts:1"
	out := run([]string{"DELAYQ_URL=" + e.srv.URL, "DELAYQ_TOKEN=" + contractToken, "DELAYQ_TOPIC=" + topic, "DELAYQ_JOB_ID=" + id},
		node, filepath.Join("out", "client.js"))
	var got struct {
		Enqueued struct {
			ID        string `json:"id"`
			Topic     string `json:"topic"`
			Duplicate bool   `json:"duplicate"`
		} `json:"enqueued"`
		Job struct {
			ID          string          `json:"id"`
			State       string          `json:"state"`
			MaxAttempts int             `json:"max_attempts"`
			Payload     json.RawMessage `json:"payload"`
		} `json:"job"`
		Missing struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"missing"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client printed %s: %v", out, err)
	}
	if got.Enqueued.ID != id || got.Enqueued.Topic != topic || got.Enqueued.Duplicate {
		t.Errorf("enqueue answered %+v", got.Enqueued)
	}
	if got.Job.ID != id || got.Job.State != "waiting" || got.Job.MaxAttempts != 3 || string(got.Job.Payload) != `{"hello":"typescript"}` {
		t.Errorf("the job came back as %+v (payload %s)", got.Job, got.Job.Payload)
	}
	if got.Missing.Status != http.StatusNotFound || got.Missing.Code != "not_found" {
		t.Errorf("a missing job answered %+v", got.Missing)
	}
	// The job is in the queue, as the Go side sees it.
	info, err := e.q.Get(testenv.Context(t), topic, id)
	if err != nil || string(info.Job.Payload) != `{"hello":"typescript"}` {
		t.Fatalf("the queue has %+v, %v", info, err)
	}
}
