//go:build !unix

package bench

import (
	"errors"
	"time"
)

// processCPU is not available here: CPU figures read 0.
func processCPU() (time.Duration, error) {
	return 0, errors.New("bench: process CPU time is not available on this system")
}
