package httpx

import (
	"net/http"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"3", 3 * time.Second, true},
		{"-1", 0, false},
		{"99999", time.Hour, true},
		{now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"soon", 0, false},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %v %v", tc.in, got, ok)
		}
	}
}

func TestBackoff(t *testing.T) {
	c := &Client{BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	if d := c.backoff(1, 5*time.Second); d != time.Second {
		t.Fatalf("Retry-After not capped: %v", d)
	}
	if d := c.backoff(1, 200*time.Millisecond); d != 200*time.Millisecond {
		t.Fatalf("Retry-After not used: %v", d)
	}
	for attempt := 1; attempt < 10; attempt++ {
		d := c.backoff(attempt, -1)
		want := min(100*time.Millisecond<<(attempt-1), time.Second)
		if d < want/2 || d > want {
			t.Fatalf("attempt %d: %v not in [%v, %v]", attempt, d, want/2, want)
		}
	}
}
