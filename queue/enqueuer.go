package queue

import (
	"context"
)

// Enqueuer schedules jobs. *engine.Engine implements it; a handler that
// enqueues follow-up jobs can take an Enqueuer instead of the engine, so
// that its tests can hand it a queuetest.Recorder.
type Enqueuer interface {
	Enqueue(ctx context.Context, topic string, j NewJob) (EnqueueResult, error)
	EnqueueBatch(ctx context.Context, topic string, jobs []NewJob) ([]BatchResult, error)
}
