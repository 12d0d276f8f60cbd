package coordinator

import "sync"

// broadcast wakes every goroutine waiting on it at once: wait returns a
// channel that the next notify closes (and replaces). It carries no
// value: a woken waiter reads the state it waits for again.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns the channel the next notify closes. Take it before reading
// the state, so a change between the read and the wait is not missed.
func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// notify wakes the current waiters.
func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
