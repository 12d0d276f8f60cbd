package main

import (
	"log/slog"
	"sync"
	"time"

	"github.com/fadcedab/adk/bus"
)

// Signal delivery warnings. A process that publishes signals into
// ADK_SIGNALS (`adk worker`, `adk serve`'s embedded worker and OTLP
// receiver, `adk eval run --trace-to`) drops and counts what cannot be
// delivered, and says so at exit and in its metrics. While it runs, signalWatch reads the
// publishers' counters every signalWarnCheck and logs a warning at once
// on the first loss, then at most one line per interval (the settings
// file's log.signal_warn_interval) with the count since the last line and
// the reasons, and one line when signals are delivered again. A line
// carries counts and reason codes only: never a signal, a principal or a
// credential.
const signalWarnCheck = time.Second

// signalTotals are the publishers' counters summed: what was delivered,
// and what was lost by reason.
type signalTotals struct {
	exported uint64
	// lost by reason (signalLossReasons' order)
	notAcked, streamFull, refused, queueFull, tooLarge uint64
}

// signalLossReasons name the loss counters in log lines.
var signalLossReasons = [...]string{"not_acknowledged", "stream_full", "refused", "queue_full", "too_large"}

func (t signalTotals) losses() [5]uint64 {
	return [5]uint64{t.notAcked, t.streamFull, t.refused, t.queueFull, t.tooLarge}
}

// sumSignalStats adds the publishers' counters. Signals dropped at
// close are left to the exit line.
func sumSignalStats(stats map[string]bus.PublisherStats) signalTotals {
	var t signalTotals
	for _, s := range stats {
		t.exported += s.Exported
		t.notAcked += s.ExportFailed
		t.streamFull += s.StreamRejected
		t.refused += s.PermanentFailures - min(s.StreamRejected, s.PermanentFailures)
		t.queueFull += s.Rejected + s.DroppedNewest + s.DroppedOldest
		t.tooLarge += s.TooLarge
	}
	return t
}

// signalWatch is the warning state of one publisher pool (see above).
// check is its step; start runs it every signalWarnCheck until stop.
type signalWatch struct {
	log       *slog.Logger
	prefix    string                               // "adk worker", the process
	stats     func() map[string]bus.PublisherStats // the pool's counters
	connected func() bool                          // the publishers' NATS connection
	interval  time.Duration

	last     signalTotals
	pending  [5]uint64 // lost since the last line, by reason
	lastWarn time.Time // when the last warning line was logged
	failing  bool      // a warning was logged and no delivery since
	// lossExported is the delivered count at the last check that saw a
	// loss: a count above it means signals went out after that loss,
	// even if they did so while the interval held its line back.
	lossExported uint64

	stopOnce sync.Once
	done     chan struct{}
	exited   chan struct{}
}

func newSignalWatch(log *slog.Logger, interval time.Duration, prefix string, stats func() map[string]bus.PublisherStats, connected func() bool) *signalWatch {
	return &signalWatch{log: log, prefix: prefix, stats: stats, connected: connected, interval: interval}
}

// start checks every period in a goroutine that stop ends.
func (w *signalWatch) start(period time.Duration) {
	w.done, w.exited = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.exited)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case now := <-t.C:
				w.check(now, sumSignalStats(w.stats()))
			}
		}
	}()
}

// stop ends the goroutine start began (a no-op when it was not started).
func (w *signalWatch) stop() {
	if w == nil || w.done == nil {
		return
	}
	w.stopOnce.Do(func() { close(w.done) })
	<-w.exited
}

// check compares the counters with the last check's and logs what a
// change calls for: a warning on a loss (the first at once, then at most
// one per interval, each with the losses since the previous line), and
// one line when signals were delivered after the last loss, once that
// loss's warning is out. The delivery may have come while the interval
// held the warning back: a publisher that delivered then and sends
// nothing more is still said to deliver again.
func (w *signalWatch) check(now time.Time, t signalTotals) {
	cur, prev := t.losses(), w.last.losses()
	lost := false
	for i := range cur {
		if d := cur[i] - min(prev[i], cur[i]); d > 0 {
			w.pending[i] += d
			lost = true
		}
	}
	if lost {
		w.lossExported = t.exported
	}
	w.last = t
	var pending uint64
	for _, n := range w.pending {
		pending += n
	}
	switch {
	case pending > 0 && (w.lastWarn.IsZero() || now.Sub(w.lastWarn) >= w.interval):
		attrs := []any{"stream", bus.SignalStreamName, "lost", pending}
		if !w.lastWarn.IsZero() {
			attrs = append(attrs, "since", now.Sub(w.lastWarn).Round(time.Second).String())
		}
		reasons := ""
		for i, n := range w.pending {
			if n > 0 {
				attrs = append(attrs, signalLossReasons[i], n)
				if reasons != "" {
					reasons += ","
				}
				reasons += signalLossReasons[i]
			}
		}
		attrs = append(attrs, "reason", reasons, "hint", w.hint())
		w.log.Warn(w.prefix+": signals not delivered", attrs...)
		w.pending, w.lastWarn, w.failing = [5]uint64{}, now, true
	case w.failing && pending == 0 && t.exported > w.lossExported:
		w.log.Warn(w.prefix+": signals delivered again", "stream", bus.SignalStreamName)
		w.failing = false
	}
}

// hint names the likely cause of the pending losses, from what the
// counters and the connection say.
func (w *signalWatch) hint() string {
	switch {
	case w.pending[0] > 0 && w.connected != nil && !w.connected():
		return "NATS is disconnected"
	case w.pending[0] > 0:
		return "JetStream acknowledged no attempt: is there an " + bus.SignalStreamName +
			" stream (a coordinator leader or adk serve creates it), and may this user publish to adk.signal.*?"
	case w.pending[1] > 0:
		return bus.SignalStreamName + " is full and discards new messages (its max_bytes or max_msgs)"
	case w.pending[2] > 0:
		return "the server refused the publish (permissions, message size or stream limits)"
	case w.pending[3] > 0:
		return "the publish queue is full: signals arrive faster than NATS takes them"
	}
	return "a signal is larger than the publisher's max_event_bytes"
}
