package cli

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/delayq/delayq/app/config"
	"github.com/sirupsen/logrus"
)

// tracing is the process's tracer provider (tracing.enabled) and how to
// flush and stop it at exit.
type tracing struct {
	provider trace.TracerProvider
	shutdown func(context.Context) error
}

// newTracing sets up tracing.exporter: the OTLP/HTTP exporter, configured
// by the standard OTEL_* variables (an unreachable collector costs dropped
// spans, never a job: the batcher exports in the background), or the
// process's global provider. version names the service's version; log
// gets the exporter's errors.
func newTracing(ctx context.Context, c config.Tracing, version string, log logrus.FieldLogger) (*tracing, error) {
	if c.Exporter == "global" {
		return &tracing{provider: otel.GetTracerProvider(), shutdown: func(context.Context) error { return nil }}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	// Defaults first, so that OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// (resource.Environment) win.
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName("delayq"), semconv.ServiceVersion(version)),
		resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("tracing: the resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	// The exporter's failures (a collector down) in the program's log, as
	// its fields, not as the standard logger's plain lines among them.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.WithError(err).Warn("tracing: spans not exported")
	}))
	return &tracing{provider: tp, shutdown: tp.Shutdown}, nil
}

// close flushes the spans still buffered, for at most 5 s.
func (t *tracing) close() error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return t.shutdown(ctx)
}
