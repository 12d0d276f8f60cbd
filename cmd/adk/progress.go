package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/fadcedab/adk/evalengine"
)

// progressInterval is how often the progress line is redrawn.
const progressInterval = 200 * time.Millisecond

// progress draws "samples done/total, pass rate so far, elapsed" on a
// terminal, redrawn in place. The engine's callback only stores the
// latest figures; one goroutine, started by start and stopped by stop,
// does the drawing, so a slow terminal never holds up the engine.
type progress struct {
	w     io.Writer
	start time.Time

	mu     sync.Mutex
	latest evalengine.Progress

	quit chan struct{}
	done chan struct{}
}

// newProgress returns a progress line on w when w is a terminal, else nil
// (no progress at all when stderr is redirected).
func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f.Fd()) {
		return nil
	}
	return &progress{w: w}
}

// update is the engine's Progress callback.
func (p *progress) update(pr evalengine.Progress) {
	p.mu.Lock()
	p.latest = pr
	p.mu.Unlock()
}

func (p *progress) begin(total int) {
	p.start = time.Now()
	p.latest.Total = total
	p.quit = make(chan struct{})
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			p.draw()
			select {
			case <-p.quit:
				return
			case <-t.C:
			}
		}
	}()
}

// end stops the drawing goroutine, waits for it and clears the line.
func (p *progress) end() {
	close(p.quit)
	<-p.done
	fmt.Fprint(p.w, "\r\x1b[2K")
}

func (p *progress) draw() {
	p.mu.Lock()
	pr := p.latest
	p.mu.Unlock()
	rate := "-"
	if pr.Done > 0 {
		rate = fmt.Sprintf("%.1f%%", 100*float64(pr.Passed)/float64(pr.Done))
	}
	fmt.Fprintf(p.w, "\r\x1b[2Kadk eval: %d/%d samples, pass rate %s, %d errors, %s",
		pr.Done, pr.Total, rate, pr.Errors, time.Since(p.start).Round(100*time.Millisecond))
}
