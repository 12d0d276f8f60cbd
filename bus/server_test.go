package bus_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func startServer(t *testing.T, cfg bus.ServerConfig) *bus.Server {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "t1"
	}
	if cfg.StoreDir == "" {
		cfg.StoreDir = t.TempDir()
	}
	cfg.MaxMemory, cfg.MaxStore = 32<<20, 256<<20
	s, err := bus.StartServer(cfg)
	if err != nil {
		t.Fatalf("StartServer: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// publishRoundTrip creates a stream, publishes with acks and reads back.
func publishRoundTrip(t *testing.T, nc *nats.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.WaitJetStreamReady(ctx, js); err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "T", Subjects: []string{bus.AllResultsSubject}, Storage: jetstream.FileStorage,
	})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	subj, _ := bus.ResultSubject("job-1", "w1")
	for i := range 5 {
		data, _ := wire.Encode("k", i)
		ack, err := js.Publish(ctx, subj, data)
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
		if ack.Sequence != uint64(i+1) {
			t.Fatalf("ack seq = %d, want %d", ack.Sequence, i+1)
		}
	}
	msg, err := st.GetMsg(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	if err := wire.Decode(msg.Data, wire.DecodeLimits{}, "k", &got); err != nil || got != 4 {
		t.Fatalf("read back %d, %v", got, err)
	}
}

func TestServer_StartsAndStopsWithoutLeaks(t *testing.T) {
	t.Run("in-process", func(t *testing.T) {
		before := goleak.IgnoreCurrent()
		s := startServer(t, bus.ServerConfig{DontListen: true})
		if s.ClientURL() != "" || s.ClientPort() != 0 {
			t.Fatalf("DontListen server has URL %q", s.ClientURL())
		}
		nc, err := s.Connect()
		if err != nil {
			t.Fatal(err)
		}
		publishRoundTrip(t, nc)
		nc.Close()
		s.Shutdown()
		s.Shutdown() // idempotent
		goleak.VerifyNone(t, append(testutil.LeakOptions(), before)...)
	})
	t.Run("loopback", func(t *testing.T) {
		before := goleak.IgnoreCurrent()
		s := startServer(t, bus.ServerConfig{Host: "127.0.0.1", Port: -1})
		if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") || s.ClientPort() <= 0 {
			t.Fatalf("ClientURL = %q, port %d", s.ClientURL(), s.ClientPort())
		}
		nc, err := bus.Connect(s.ClientURL(), bus.WithName("test"))
		if err != nil {
			t.Fatal(err)
		}
		publishRoundTrip(t, nc)
		nc.Close()
		s.Shutdown()
		goleak.VerifyNone(t, append(testutil.LeakOptions(), before)...)
	})
}

func TestServerConfig_Validate(t *testing.T) {
	ok := bus.ServerConfig{Name: "n", StoreDir: "/tmp/x", DontListen: true}
	cl := func(c *bus.ClusterConfig) bus.ServerConfig {
		return bus.ServerConfig{Name: "n", StoreDir: "/tmp/x", Port: -1, Cluster: c}
	}
	good := &bus.ClusterConfig{Name: "c", Port: 6222, Routes: []string{"nats://127.0.0.1:6222"}}
	cases := []struct {
		name  string
		cfg   bus.ServerConfig
		field string
	}{
		{"no name", bus.ServerConfig{StoreDir: "/x"}, "Name"},
		{"no store", bus.ServerConfig{Name: "n"}, "StoreDir"},
		{"bad port", bus.ServerConfig{Name: "n", StoreDir: "/x", Port: 70000}, "Port"},
		{"bad host", bus.ServerConfig{Name: "n", StoreDir: "/x", Host: "not a host"}, "Host"},
		{"neg memory", bus.ServerConfig{Name: "n", StoreDir: "/x", DontListen: true, MaxMemory: -1}, "MaxMemory"},
		{"user without password", bus.ServerConfig{Name: "n", StoreDir: "/x", DontListen: true, Users: []bus.User{{Name: "a"}}}, "Users[0]"},
		{"cluster with DontListen", bus.ServerConfig{Name: "n", StoreDir: "/x", DontListen: true, Cluster: good}, "DontListen"},
		{"cluster no name", cl(&bus.ClusterConfig{Port: 1, Routes: good.Routes}), "Cluster.Name"},
		{"cluster no port", cl(&bus.ClusterConfig{Name: "c", Routes: good.Routes}), "Cluster.Port"},
		{"cluster no routes", cl(&bus.ClusterConfig{Name: "c", Port: 1}), "Cluster.Routes"},
		{"cluster bad route", cl(&bus.ClusterConfig{Name: "c", Port: 1, Routes: []string{"http://x"}}), "Cluster.Routes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var ce *bus.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, bus.ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ConfigError on %s", err, tc.field)
			}
			if _, err := bus.StartServer(tc.cfg); !errors.Is(err, bus.ErrInvalidConfig) {
				t.Fatalf("StartServer = %v", err)
			}
		})
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := cl(good).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConnect_CredentialsNeverInErrors(t *testing.T) {
	const secret = "s3cret-Pw-4711"
	s := startServer(t, bus.ServerConfig{Port: -1, Users: []bus.User{{Name: "alice", Password: secret}}})
	url := s.ClientURL()
	host := strings.TrimPrefix(url, "nats://")

	nc, err := bus.Connect(url, bus.WithUserPassword("alice", secret))
	if err != nil {
		t.Fatalf("good password: %v", err)
	}
	nc.Close()
	nc, err = bus.Connect("alice:" + secret + "@" + host) // no scheme, as nats.go allows
	if err != nil {
		t.Fatalf("URL without scheme: %v", err)
	}
	nc.Close()

	const wrong = "wrong-Pw-0815"
	for name, tc := range map[string]struct {
		url  string
		opts []bus.Option
	}{
		"option":    {url, []bus.Option{bus.WithUserPassword("alice", wrong)}},
		"url":       {"nats://alice:" + wrong + "@" + host, nil},
		"bad url":   {"nats://alice:" + wrong + "@" + host + ":x:y", nil},
		"two urls":  {url + ",nats://alice:" + wrong + "@" + host, []bus.Option{bus.WithUserPassword("alice", wrong)}},
		"no server": {"nats://alice:" + wrong + "@127.0.0.1:1", []bus.Option{bus.WithMaxReconnects(0)}},
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := bus.Connect(tc.url, append(tc.opts, bus.WithConnectTimeout(time.Second))...)
			if err == nil {
				nc.Close()
				t.Fatal("connect with a wrong password succeeded")
			}
			if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), secret) {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

func TestConnect_PermissionDenialIsLogged(t *testing.T) {
	s := startServer(t, bus.ServerConfig{Port: -1, Users: []bus.User{{
		Name: "bob", Password: "pw", PublishAllow: []string{"allowed.>"}, SubscribeAllow: []string{"_INBOX.>"},
	}}})
	var logs testutil.Buffer
	nc, err := bus.Connect(s.ClientURL(), bus.WithUserPassword("bob", "pw"),
		bus.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish("denied.subject", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "permission denial in the log", func() bool {
		return strings.Contains(logs.String(), "nats permission denied")
	})
}

func TestWaitJetStreamReady_HonoursContext(t *testing.T) {
	s := startServer(t, bus.ServerConfig{DontListen: true})
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := bus.WaitJetStreamReady(ctx, js); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
}

func TestSubjects(t *testing.T) {
	if s, err := bus.TaskSubject("worker-1"); err != nil || s != "adk.task.worker-1" {
		t.Fatalf("TaskSubject = %q, %v", s, err)
	}
	if s, _ := bus.ResultSubject("job_9", "w-1"); s != "adk.result.job_9.w-1" {
		t.Fatal(s)
	}
	if _, err := bus.ResultSubject("job_9", "w.*"); err == nil {
		t.Fatal("a worker id with separators made a result subject")
	}
	for subj, want := range map[string]string{"adk.result.job_9.w-1": "w-1", "adk.result.job_9": "", "adk.result.j.w.x": "", "adk.task.j.w": ""} {
		if got := bus.ResultSender(subj); got != want {
			t.Fatalf("ResultSender(%q) = %q, want %q", subj, got, want)
		}
	}
	if s, _ := bus.SignalSubject("span"); s != "adk.signal.span" {
		t.Fatal(s)
	}
	if s, _ := bus.CoordSubject("submit"); s != "adk.coord.v1.submit" {
		t.Fatal(s)
	}
	for _, bad := range []string{"", "a.b", "a b", "*", ">", "a\x00", "a\n", "é", strings.Repeat("a", bus.MaxTokenLen+1)} {
		if _, err := bus.TaskSubject(bad); !errors.Is(err, bus.ErrInvalidToken) {
			t.Errorf("TaskSubject(%q) = %v, want ErrInvalidToken", bad, err)
		}
	}
}
