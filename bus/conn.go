package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Connection defaults. Reconnects never give up by default: a worker or
// store node should ride out a NATS restart rather than exit.
const (
	// DefaultReconnectBufSize bounds what a disconnected client buffers.
	DefaultReconnectBufSize = 8 << 20
	// DefaultPingInterval is how often the client pings the server.
	DefaultPingInterval = 20 * time.Second
	// DefaultConnectTimeout bounds one dial.
	DefaultConnectTimeout = 2 * time.Second
	// reconnectBase and reconnectMax shape the jittered exponential backoff.
	reconnectBase = 100 * time.Millisecond
	reconnectMax  = 2 * time.Second
)

// Option configures Connect.
type Option func(*connConfig)

type connConfig struct {
	name          string
	user, pass    string
	credsFile     string
	nkeySeedFile  string
	logger        *slog.Logger
	maxReconnects int
	setReconnects bool
	timeout       time.Duration
	retryOnFail   bool
	extra         []nats.Option
}

// WithName sets the connection name the server shows in monitoring.
func WithName(name string) Option { return func(c *connConfig) { c.name = name } }

// WithUserPassword authenticates with a username and password.
func WithUserPassword(user, password string) Option {
	return func(c *connConfig) { c.user, c.pass = user, password }
}

// WithCredsFile authenticates with a NATS .creds file (JWT plus nkey seed).
func WithCredsFile(path string) Option { return func(c *connConfig) { c.credsFile = path } }

// WithNkeySeedFile authenticates with a bare nkey seed file.
func WithNkeySeedFile(path string) Option { return func(c *connConfig) { c.nkeySeedFile = path } }

// WithLogger sets where connection events and async errors are logged;
// the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *connConfig) { c.logger = l } }

// WithMaxReconnects bounds reconnect attempts; -1 (the default) never gives
// up.
func WithMaxReconnects(n int) Option {
	return func(c *connConfig) { c.maxReconnects, c.setReconnects = n, true }
}

// WithConnectTimeout bounds one dial (default DefaultConnectTimeout).
func WithConnectTimeout(d time.Duration) Option { return func(c *connConfig) { c.timeout = d } }

// WithRetryOnFailedConnect keeps retrying in the background when the first
// connect fails, instead of returning an error.
func WithRetryOnFailedConnect() Option { return func(c *connConfig) { c.retryOnFail = true } }

// WithNATSOptions appends raw nats.go options, applied after ours.
func WithNATSOptions(opts ...nats.Option) Option {
	return func(c *connConfig) { c.extra = append(c.extra, opts...) }
}

func (c *connConfig) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	return slog.Default()
}

// natsOptions renders the defaults plus what the caller set. Credentials
// other than user/password are attached by Connect, which can fail.
func (c *connConfig) natsOptions() []nats.Option {
	log := c.log()
	maxRe := -1
	if c.setReconnects {
		maxRe = c.maxReconnects
	}
	timeout := c.timeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	opts := []nats.Option{
		nats.MaxReconnects(maxRe),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.ReconnectBufSize(DefaultReconnectBufSize),
		nats.PingInterval(DefaultPingInterval),
		nats.MaxPingsOutstanding(3),
		nats.Timeout(timeout),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			if errors.Is(err, nats.ErrPermissionViolation) {
				// Without this log a denial only shows up as a request
				// timing out on the caller.
				log.Error("nats permission denied", "subject", subj, "err", err)
				return
			}
			log.Warn("nats async error", "subject", subj, "err", err)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "server", nc.ConnectedServerName())
		}),
	}
	if c.name != "" {
		opts = append(opts, nats.Name(c.name))
	}
	if c.user != "" || c.pass != "" {
		opts = append(opts, nats.UserInfo(c.user, c.pass))
	}
	if c.retryOnFail {
		opts = append(opts, nats.RetryOnFailedConnect(true))
	}
	return append(opts, c.extra...)
}

// reconnectDelay is exponential backoff from 100 ms to 2 s with ±50%
// jitter, so a fleet does not reconnect in lockstep after a server restart.
func reconnectDelay(attempts int) time.Duration {
	d := reconnectBase
	for i := 1; i < attempts && d < reconnectMax; i++ {
		d *= 2
	}
	d = min(d, reconnectMax)
	return d/2 + rand.N(d)
}

// Connect dials url (a comma-separated list is allowed) with reconnect,
// ping, buffer and error-handler defaults. User info embedded in url is
// moved into the connect options, and no returned error ever contains a
// password: the message is scrubbed of every secret Connect was given.
func Connect(rawURL string, opts ...Option) (*nats.Conn, error) {
	var c connConfig
	for _, o := range opts {
		o(&c)
	}
	urls, secrets, err := splitUserInfo(rawURL, &c)
	if err != nil {
		return nil, err
	}
	if c.pass != "" {
		secrets = append(secrets, c.pass)
	}
	all := c.natsOptions()
	if c.credsFile != "" {
		all = append(all, nats.UserCredentials(c.credsFile))
	}
	if c.nkeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.nkeySeedFile)
		if err != nil {
			return nil, scrub(fmt.Errorf("bus: nkey seed file: %w", err), secrets)
		}
		all = append(all, o)
	}
	nc, err := nats.Connect(urls, all...)
	if err != nil {
		return nil, scrub(fmt.Errorf("bus: connect %s: %w", urls, err), secrets)
	}
	return nc, nil
}

// splitUserInfo strips user:password@ from each URL, moving them into c,
// and returns the cleaned list plus the secrets seen. Parse errors name
// the URL position, never the URL: it may hold a password.
func splitUserInfo(raw string, c *connConfig) (string, []string, error) {
	var secrets []string
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p != "" && !strings.Contains(p, "://") {
			p = "nats://" + p // nats.go accepts host:port; url.Parse does not
		}
		u, err := url.Parse(p)
		if err != nil {
			return "", nil, fmt.Errorf("bus: connect: server URL %d is not a valid URL", i)
		}
		if u.User != nil {
			if pw, ok := u.User.Password(); ok {
				secrets = append(secrets, pw)
				if c.user == "" && c.pass == "" {
					c.user, c.pass = u.User.Username(), pw
				}
			} else {
				// A bare userinfo is a token.
				secrets = append(secrets, u.User.Username())
				c.extra = append([]nats.Option{nats.Token(u.User.Username())}, c.extra...)
			}
			u.User = nil
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ","), secrets, nil
}

// redactedError carries a scrubbed message; errors.Is still reaches the
// cause.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func scrub(err error, secrets []string) error {
	msg := err.Error()
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return &redactedError{msg: msg, err: err}
}

// WaitJetStreamReady polls AccountInfo until it answers or ctx ends. Each
// attempt has its own 1 s timeout: a JetStream API request sent before a
// meta leader exists may get no reply at all, and would otherwise wait out
// the whole ctx.
func WaitJetStreamReady(ctx context.Context, js jetstream.JetStream) error {
	backoff := 10 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := js.AccountInfo(actx)
		cancel()
		if err == nil {
			return nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("bus: jetstream not ready: %w (last error: %v)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(backoff*2, 250*time.Millisecond)
	}
}
