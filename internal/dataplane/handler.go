package dataplane

import (
	"context"
	"runtime/debug"
)

// runHandler calls h, turning a panic into a *PanicError.
func runHandler(ctx context.Context, h Handler, j *Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h.Handle(ctx, j)
}
