package bus

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Defaults for an embedded server. JetStream would otherwise size itself
// from host RAM and disk (75% of each); on a shared 2-core box that is far
// too much, so the defaults are small and callers raise them on purpose.
const (
	// DefaultMaxMemory is the JetStream memory-storage limit.
	DefaultMaxMemory int64 = 256 << 20
	// DefaultMaxStore is the JetStream file-storage limit.
	DefaultMaxStore int64 = 4 << 30
	// DefaultReadyTimeout bounds how long StartServer waits for the server
	// (and its routes, when clustered) to accept connections.
	DefaultReadyTimeout = 10 * time.Second
)

// ServerConfig configures one embedded nats-server with JetStream.
//
// The single-binary default is DontListen: no socket at all, clients connect
// in-process through (*Server).Connect. Set Host/Port instead to expose a
// listener (Port -1 picks a free port).
type ServerConfig struct {
	// Name is the server name; required, and unique within a cluster.
	Name string
	// StoreDir is the JetStream storage directory; required.
	StoreDir string
	// Host is the client listen address; default 127.0.0.1. Ignored with
	// DontListen.
	Host string
	// Port is the client port; -1 picks a free one, 0 means the NATS
	// default 4222. Ignored with DontListen.
	Port int
	// DontListen serves in-process connections only. It cannot be combined
	// with Cluster: nats-server never starts routes without a client
	// listener.
	DontListen bool
	// MaxMemory and MaxStore are the JetStream limits in bytes; zero takes
	// DefaultMaxMemory / DefaultMaxStore.
	MaxMemory, MaxStore int64
	// Cluster, when non-nil, joins a JetStream cluster.
	Cluster *ClusterConfig
	// Users, when non-empty, turns on username/password authentication.
	Users []User
	// Logger receives the server's notices, warnings and errors. Nil turns
	// server logging off.
	Logger *slog.Logger
	// ReadyTimeout bounds the wait for ReadyForConnections; zero takes
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// ClusterConfig makes a server one node of a JetStream cluster.
type ClusterConfig struct {
	// Name is the cluster name, identical on every node; required.
	Name string
	// Host is the route listen address; default 127.0.0.1.
	Host string
	// Port is the route listen port; required (a real port, so the other
	// nodes' Routes can name it).
	Port int
	// Routes are the route URLs of every node, this one included
	// (nats://127.0.0.1:6222 ...). JetStream sizes its meta group from an
	// explicit full mesh.
	Routes []string
}

// User is one username/password login, optionally restricted to subjects.
type User struct {
	// Name is the username.
	Name string
	// Password is the password. It is never logged.
	Password string
	// PublishAllow and SubscribeAllow, when non-nil, are the only subjects
	// the user may publish or subscribe to. A denial reaches the client as
	// an async error, which Connect's error handler logs.
	PublishAllow, SubscribeAllow []string
}

// Server is a running embedded nats-server.
type Server struct {
	cfg      ServerConfig
	ns       *server.Server
	shutdown sync.Once
}

// Validate checks the config and returns a *ConfigError for the first
// invalid field.
func (c ServerConfig) Validate() error {
	if c.Name == "" {
		return &ConfigError{Field: "Name", Reason: "required"}
	}
	if c.StoreDir == "" {
		return &ConfigError{Field: "StoreDir", Reason: "required"}
	}
	if !c.DontListen {
		if c.Port < -1 || c.Port > 65535 {
			return &ConfigError{Field: "Port", Reason: "must be -1 (random), 0 (default) or 1..65535"}
		}
		if c.Host != "" && net.ParseIP(c.Host) == nil && c.Host != "localhost" {
			return &ConfigError{Field: "Host", Reason: "must be an IP address"}
		}
	}
	if c.MaxMemory < 0 {
		return &ConfigError{Field: "MaxMemory", Reason: "must not be negative"}
	}
	if c.MaxStore < 0 {
		return &ConfigError{Field: "MaxStore", Reason: "must not be negative"}
	}
	if c.ReadyTimeout < 0 {
		return &ConfigError{Field: "ReadyTimeout", Reason: "must not be negative"}
	}
	for i, u := range c.Users {
		if u.Name == "" || u.Password == "" {
			return &ConfigError{Field: "Users[" + strconv.Itoa(i) + "]", Reason: "name and password are required"}
		}
	}
	if cl := c.Cluster; cl != nil {
		if c.DontListen {
			return &ConfigError{Field: "DontListen", Reason: "a cluster needs a client listener: nats-server never starts routes under DontListen"}
		}
		if cl.Name == "" {
			return &ConfigError{Field: "Cluster.Name", Reason: "required"}
		}
		if cl.Port <= 0 || cl.Port > 65535 {
			return &ConfigError{Field: "Cluster.Port", Reason: "must be 1..65535"}
		}
		if len(cl.Routes) == 0 {
			return &ConfigError{Field: "Cluster.Routes", Reason: "required: list every node's route URL"}
		}
		for _, r := range cl.Routes {
			u, err := url.Parse(r)
			if err != nil || u.Scheme != "nats" || u.Host == "" {
				return &ConfigError{Field: "Cluster.Routes", Reason: "each route must be nats://host:port"}
			}
		}
	}
	return nil
}

// options builds a fresh server.Options: nats-server misbehaves when one
// Options value is shared by several servers or reused (nats-server#5465).
func (c ServerConfig) options() *server.Options {
	o := &server.Options{
		ServerName:         c.Name,
		JetStream:          true,
		StoreDir:           c.StoreDir,
		JetStreamMaxMemory: c.MaxMemory,
		JetStreamMaxStore:  c.MaxStore,
		NoSigs:             true,
		NoLog:              c.Logger == nil,
		DontListen:         c.DontListen,
		Host:               c.Host,
		Port:               c.Port,
	}
	if o.JetStreamMaxMemory == 0 {
		o.JetStreamMaxMemory = DefaultMaxMemory
	}
	if o.JetStreamMaxStore == 0 {
		o.JetStreamMaxStore = DefaultMaxStore
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	for _, u := range c.Users {
		su := &server.User{Username: u.Name, Password: u.Password}
		if u.PublishAllow != nil || u.SubscribeAllow != nil {
			su.Permissions = &server.Permissions{}
			if u.PublishAllow != nil {
				su.Permissions.Publish = &server.SubjectPermission{Allow: u.PublishAllow}
			}
			if u.SubscribeAllow != nil {
				su.Permissions.Subscribe = &server.SubjectPermission{Allow: u.SubscribeAllow}
			}
		}
		o.Users = append(o.Users, su)
	}
	if cl := c.Cluster; cl != nil {
		host := cl.Host
		if host == "" {
			host = "127.0.0.1"
		}
		o.Cluster = server.ClusterOpts{Name: cl.Name, Host: host, Port: cl.Port}
		for _, r := range cl.Routes {
			u, _ := url.Parse(r) // checked by Validate
			o.Routes = append(o.Routes, u)
		}
	}
	return o
}

// StartServer validates cfg, starts the server and waits (bounded by
// cfg.ReadyTimeout) until it accepts connections, and routes when
// clustered. A clustered server may not yet have a JetStream meta leader
// when this returns; use WaitJetStreamReady before JetStream calls.
func StartServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ns, err := server.NewServer(cfg.options())
	if err != nil {
		return nil, fmt.Errorf("bus: new server %s: %w", cfg.Name, err)
	}
	if cfg.Logger != nil {
		ns.SetLogger(slogAdapter{cfg.Logger.With("component", "nats-server", "server", cfg.Name)}, false, false)
	}
	ns.Start()
	timeout := cfg.ReadyTimeout
	if timeout == 0 {
		timeout = DefaultReadyTimeout
	}
	if !ns.ReadyForConnections(timeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("%w: %s after %v", ErrServerNotReady, cfg.Name, timeout)
	}
	return &Server{cfg: cfg, ns: ns}, nil
}

// Name returns the server name.
func (s *Server) Name() string { return s.cfg.Name }

// NATS returns the underlying nats-server, for health checks such as
// JetStreamIsCurrent. Do not shut it down directly; use Shutdown.
func (s *Server) NATS() *server.Server { return s.ns }

// ClientURL returns the nats:// URL clients dial, or "" under DontListen.
func (s *Server) ClientURL() string {
	if s.cfg.DontListen {
		return ""
	}
	return s.ns.ClientURL()
}

// ClientPort returns the bound client port, or 0 under DontListen.
func (s *Server) ClientPort() int {
	if s.cfg.DontListen {
		return 0
	}
	if a, ok := s.ns.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// Connect opens a client connection with the same defaults as the package
// Connect; opts are applied after them. Under DontListen it connects
// in-process; otherwise it dials ClientURL.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	cc := connConfig{name: "adk-" + s.cfg.Name}
	all := append(cc.natsOptions(), opts...)
	if s.cfg.DontListen {
		all = append(all, nats.InProcessServer(s.ns))
		nc, err := nats.Connect("", all...)
		if err != nil {
			return nil, fmt.Errorf("bus: connect in-process to %s: %w", s.cfg.Name, err)
		}
		return nc, nil
	}
	nc, err := nats.Connect(s.ClientURL(), all...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect to %s: %w", s.cfg.Name, err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped. It is safe to
// call more than once.
func (s *Server) Shutdown() {
	s.shutdown.Do(func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	})
}

// slogAdapter routes nats-server logs to slog. Fatalf is logged as an error:
// an embedded server must never exit the process.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(format string, v ...any) { a.l.Info(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Warnf(format string, v ...any)   { a.l.Warn(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Fatalf(format string, v ...any) {
	a.l.Error(fmt.Sprintf(format, v...), "fatal", true)
}
func (a slogAdapter) Errorf(format string, v ...any) { a.l.Error(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Debugf(format string, v ...any) { a.l.Debug(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Tracef(format string, v ...any) { a.l.Debug(fmt.Sprintf(format, v...)) }
