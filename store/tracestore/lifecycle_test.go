package tracestore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
)

// fakeClock is a settable clock for receiver TTLs.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func openWithSink(t *testing.T, o Options, clock *fakeClock, sink LifecycleSink) *Store {
	t.Helper()
	s, err := Open(Config{InMemory: true, Small: true, Options: o, Clock: clock.Now, LifecycleSink: sink})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestLifecycle_ForgedCapabilityIsCountedAndBalancesAdmission(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	s := openWithSink(t, Options{MaxLifecyclePending: 2}, clock, nil)
	for range 5 {
		wantCode(t, s.DeliverLifecycle("lcr_forged", workflowJSON("w", "i", nil)), CodeLifecycleCapabilityRejected)
	}
	st := s.Status()
	if st.Counters.LifecycleCapabilityRejected != 5 || st.LifecyclePending != 0 {
		t.Fatalf("status %+v", st)
	}
	// The forged deliveries took no slot: a real receiver still gets both.
	capability, err := s.NewLifecycleReceiver(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeliverLifecycle(capability, workflowJSON("w", "i", nil)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "local delivery", func() bool { return s.PrincipalStatus("alice").Events == 1 })
}

func TestLifecycle_MailboxAdmissionIsBounded(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	release := make(chan struct{})
	var delivered sync.WaitGroup
	s := openWithSink(t, Options{MaxLifecyclePending: 2}, clock, func(string, []byte) error {
		<-release // a suspended store
		delivered.Done()
		return nil
	})
	capability, _ := s.NewLifecycleReceiver(context.Background(), "alice")
	accepted, dropped := 0, 0
	delivered.Add(2)
	for range 10 {
		if err := s.DeliverLifecycle(capability, workflowJSON("w", "i", nil)); err == nil {
			accepted++
		} else if ErrorCode(err) == CodeLifecycleDeliveryDropped {
			dropped++
		}
	}
	if accepted != 2 || dropped != 8 || s.Status().Counters.LifecycleDeliveryDropped != 8 {
		t.Fatalf("accepted %d dropped %d", accepted, dropped)
	}
	close(release)
	delivered.Wait()
	if err := s.DeliverLifecycle(capability, make([]byte, MaxLifecycleInputBytes+1)); ErrorCode(err) != CodeLifecycleDeliveryDropped {
		t.Fatalf("oversized: %v", err)
	}
}

func TestLifecycle_ExpiredCapabilityDoesNotSaturateNewReceiver(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	s := openWithSink(t, Options{Retention: time.Minute, LifecycleReceiverTTL: time.Hour}, clock, nil)
	owner, ownerGone := context.WithCancel(context.Background())
	old, _ := s.NewLifecycleReceiver(owner, "alice")
	// Alive owner: renewed past the TTL, and past event retention.
	clock.Advance(2 * time.Hour)
	if err := s.DeliverLifecycle(old, workflowJSON("w", "i", nil)); err != nil {
		t.Fatalf("live owner: %v", err)
	}
	ownerGone()
	clock.Advance(59 * time.Minute)
	if err := s.DeliverLifecycle(old, workflowJSON("w", "i", nil)); err != nil {
		t.Fatalf("within TTL after the owner died: %v", err)
	}
	clock.Advance(2 * time.Hour)
	wantCode(t, s.DeliverLifecycle(old, workflowJSON("w", "i", nil)), CodeLifecycleCapabilityRejected)
	fresh, _ := s.NewLifecycleReceiver(context.Background(), "alice")
	if err := s.DeliverLifecycle(fresh, workflowJSON("w", "i", nil)); err != nil {
		t.Fatalf("fresh receiver: %v", err)
	}
	if st := s.Status(); st.Counters.LifecycleReceiversPruned != 1 || st.LifecycleReceivers != 1 {
		t.Fatalf("status %+v", st)
	}
}
