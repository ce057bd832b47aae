package queue

import (
	"errors"
)

// ErrLeaseExpired is the cause of a handler context that ended because the
// job's lease ran out (the heartbeat could not renew it): another worker may
// be running the job by now.
var ErrLeaseExpired = errors.New("lease expired")

// ErrShutdown is the cause of a handler context that ended because the
// worker's shutdown timeout ran out.
var ErrShutdown = errors.New("worker shutting down")
