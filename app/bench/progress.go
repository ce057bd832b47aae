package bench

import (
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress shows one phase of a run: label names it, total is how many
// items it has (-1 when unknown) and current reads how many are done. It
// returns the function that ends the display. current is read from a
// goroutine of the display's own every so often, never from the hot path.
type Progress func(label string, total int64, current func() int64) (done func())

// show starts a phase on p, or does nothing when p is nil.
func (p Progress) show(label string, total int64, current func() int64) (done func()) {
	if p == nil {
		return func() {}
	}
	return p(label, total, current)
}

// Bars returns a Progress that draws progress bars on w (a terminal).
func Bars(w io.Writer) Progress {
	return func(label string, total int64, current func() int64) func() {
		bar := progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("jobs"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetRenderBlankState(true),
		)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					_ = bar.Set64(current())
				}
			}
		}()
		var once sync.Once
		return func() {
			once.Do(func() {
				close(stop)
				wg.Wait()
				_ = bar.Finish()
				_ = bar.Clear()
			})
		}
	}
}
