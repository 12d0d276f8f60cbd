package devapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/fadcedab/adk/store/evalrecord"
)

// eventID is the id of a job event: it changes whenever the job's phase
// or progress does, so a reconnecting client that sends it as
// Last-Event-ID is not sent the state it already has.
func eventID(j *evalrecord.Job) string {
	return fmt.Sprintf("%d-%d-%d-%d", j.Revision, j.Progress.Dispatched, j.Progress.Done, j.Progress.Errors)
}

// watchHub shares one status poller per job among its event streams, so
// 500 browsers on one job cost one status call per interval.
type watchHub struct {
	s      *Server
	mu     sync.Mutex
	byKey  map[string]*watch
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// watch is one job's poller: the latest snapshot and a channel closed
// (and replaced) whenever it changes.
type watch struct {
	key     string
	scope   string
	jobID   string
	subs    int
	mu      sync.Mutex
	job     *evalrecord.Job
	err     *Error
	changed chan struct{}
	stop    chan struct{}
}

func newWatchHub(s *Server) *watchHub {
	return &watchHub{s: s, byKey: map[string]*watch{}, done: make(chan struct{})}
}

// subscribe returns the job's watch (starting its poller) or nil after
// close.
func (h *watchHub) subscribe(scope, jobID string, first *evalrecord.Job) *watch {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	key := scope + "\x00" + jobID
	w := h.byKey[key]
	if w == nil {
		w = &watch{key: key, scope: scope, jobID: jobID, job: first, changed: make(chan struct{}), stop: make(chan struct{})}
		h.byKey[key] = w
		h.wg.Add(1)
		go h.poll(w)
	}
	w.subs++
	h.s.metrics.streams.Inc()
	return w
}

func (h *watchHub) unsubscribe(w *watch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.s.metrics.streams.Dec()
	w.subs--
	if w.subs == 0 {
		delete(h.byKey, w.key)
		close(w.stop)
	}
}

// poll refreshes w every EventInterval until it has no subscribers, the
// hub closes, or the job ends (its final state stays readable).
func (h *watchHub) poll(w *watch) {
	defer h.wg.Done()
	t := time.NewTicker(h.s.o.EventInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-h.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		j, err := h.s.o.Coord.Status(ctx, w.scope, w.jobID)
		cancel()
		w.mu.Lock()
		var notify bool
		switch {
		case err != nil:
			// A coordinator failover is transient: keep the last state
			// and retry; a job that vanished (pruned) ends the streams.
			if e := serviceError(err); e.Status == http.StatusNotFound {
				w.err, notify = e, true
			}
		case eventID(j) != eventID(w.job):
			w.job, notify = j, true
		}
		terminal := w.err != nil || w.job.Phase.Terminal()
		if notify {
			close(w.changed)
			w.changed = make(chan struct{})
		}
		w.mu.Unlock()
		if terminal {
			return
		}
	}
}

func (w *watch) snapshot() (*evalrecord.Job, *Error, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.job, w.err, w.changed
}

func (h *watchHub) close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// events streams a job's status as server-sent events: "status" with the
// public job whenever its phase or progress changes, then "end" once it
// is terminal. Last-Event-ID skips the state the client already has.
func (s *Server) events(w http.ResponseWriter, c *call) *Error {
	cl, scope, id, e := s.jobCall(c)
	if e != nil {
		return e
	}
	job, err := cl.Status(c.r.Context(), scope, id)
	if err != nil {
		return serviceError(err)
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return errorf(http.StatusInternalServerError, "internal_error", "streaming unsupported")
	}
	var wt *watch
	if !job.Phase.Terminal() {
		if wt = s.watches.subscribe(scope, id, job); wt == nil {
			return errorf(http.StatusServiceUnavailable, CodeAPIUnavailable, "the server is shutting down")
		}
		defer s.watches.unsubscribe(wt)
	}
	h := w.Header()
	h.Set("content-type", "text/event-stream; charset=utf-8")
	h.Set("x-accel-buffering", "no")
	w.WriteHeader(http.StatusOK)
	last := c.r.Header.Get("last-event-id")
	if _, err := fmt.Fprint(w, "retry: 1000\n\n"); err != nil {
		return nil
	}
	send := func(j *evalrecord.Job) bool {
		eid := eventID(j)
		if eid == last {
			return true
		}
		last = eid
		b, err := json.Marshal(j)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: status\nid: %s\ndata: %s\n\n", eid, b); err != nil {
			return false
		}
		return true
	}
	end := func(j *evalrecord.Job) {
		_, _ = fmt.Fprintf(w, "event: end\nid: %s\ndata: {\"job_id\":%q,\"phase\":%q}\n\n", eventID(j), j.JobID, j.Phase)
		fl.Flush()
	}
	if !send(job) {
		return nil
	}
	fl.Flush()
	if wt == nil {
		end(job)
		return nil
	}
	hb := time.NewTicker(s.o.EventHeartbeat)
	defer hb.Stop()
	for {
		j, werr, changed := wt.snapshot()
		if werr != nil {
			_, _ = fmt.Fprintf(w, "event: error\ndata: %s\n\n", bytes.TrimSpace(werr.body()))
			fl.Flush()
			return nil
		}
		if !send(j) {
			return nil
		}
		fl.Flush()
		if j.Phase.Terminal() {
			end(j)
			return nil
		}
		select {
		case <-c.r.Context().Done():
			return nil
		case <-s.watches.done:
			return nil
		case <-hb.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			fl.Flush()
		case <-changed:
		}
	}
}
