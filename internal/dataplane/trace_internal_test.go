package dataplane

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/delayq/delayq/internal/testenv"
)

// countingHook counts the pipelines a client sends.
type countingHook struct{ pipes atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipes.Add(1)
		return next(ctx, cmds)
	}
}

// A trace write that fails skips the next ones for PushTimeout, as a
// failed push does: an unreachable Redis delays traced enqueues once, not
// each of them.
func TestTraceWritesPauseAfterAFailure(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RefusedAddr(t), MaxRetries: -1, DialerRetries: 1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, addr)
		}})
	t.Cleanup(func() { _ = rdb.Close() })
	hook := &countingHook{}
	rdb.AddHook(hook)
	c, err := New(rdb, Config{Trace: true, PushTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(testenv.Context(t), sc)
	c.noteTraces(ctx, "t", []NewJob{{ID: "a"}})
	if !c.pushesPaused() || hook.pipes.Load() != 1 {
		t.Fatalf("after a failed trace write: paused %t, %d pipelines sent", c.pushesPaused(), hook.pipes.Load())
	}
	c.noteTraces(ctx, "t", []NewJob{{ID: "b"}})
	if n := hook.pipes.Load(); n != 1 {
		t.Fatalf("%d pipelines sent while paused, want none more", n)
	}
}
