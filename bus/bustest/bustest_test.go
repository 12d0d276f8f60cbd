package bustest_test

import (
	"testing"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestStart_InProcessAndListening: a zero Port has no socket, Port -1 a
// loopback URL; both answer JetStream and hold a signal stream.
func TestStart_InProcessAndListening(t *testing.T) {
	in := bustest.Start(t, bus.ServerConfig{})
	if in.ClientPort() > 0 {
		t.Errorf("in-process server listens on port %d", in.ClientPort())
	}
	if st := in.SignalStream(t, bus.SignalStreamConfig{MaxMsgs: 4}); st.CachedInfo().Config.MaxMsgs != 4 {
		t.Errorf("signal stream MaxMsgs %d", st.CachedInfo().Config.MaxMsgs)
	}
	out := bustest.Start(t, bus.ServerConfig{Port: -1})
	if out.ClientPort() <= 0 || out.ClientURL() == "" {
		t.Fatalf("listening server: port %d, url %q", out.ClientPort(), out.ClientURL())
	}
}
