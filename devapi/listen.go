package devapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// ListenConfig is where and how an HTTP listener of an adk process
// listens. Flag names the flag the address came from, for errors.
type ListenConfig struct {
	Flag, Addr       string
	TLSCert, TLSKey  string
	InsecureListen   bool
	ReadHeaderTimout time.Duration
}

// ErrInsecureListen is returned for a non-loopback address without TLS
// or an explicit --insecure-listen.
var ErrInsecureListen = errors.New("a non-loopback listener needs --tls-cert and --tls-key, or --insecure-listen")

// IsLoopback reports whether addr (host:port) listens on loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckListen validates cfg without listening: the address parses, the
// TLS pair is both-or-neither, and a non-loopback address has TLS or
// InsecureListen.
func CheckListen(cfg ListenConfig) error {
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return fmt.Errorf("--%s %q: want host:port (e.g. 127.0.0.1:8080)", cfg.Flag, cfg.Addr)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if !IsLoopback(cfg.Addr) && cfg.TLSCert == "" && !cfg.InsecureListen {
		return fmt.Errorf("--%s %s: %w", cfg.Flag, cfg.Addr, ErrInsecureListen)
	}
	return nil
}

// Listener is a running HTTP server.
type Listener struct {
	srv  *http.Server
	ln   net.Listener
	url  string
	done chan struct{}
	once sync.Once
	err  error
}

// Listen checks cfg, binds and serves h until Shutdown.
func Listen(cfg ListenConfig, h http.Handler) (*Listener, error) {
	if err := CheckListen(cfg); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", cfg.Flag, err)
	}
	scheme := "http"
	if cfg.TLSCert != "" {
		pair, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
		scheme = "https"
	}
	rht := cfg.ReadHeaderTimout
	if rht == 0 {
		rht = 10 * time.Second
	}
	l := &Listener{srv: &http.Server{Handler: h, ReadHeaderTimeout: rht, MaxHeaderBytes: 64 << 10},
		ln: ln, url: scheme + "://" + ln.Addr().String(), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.err = err
		}
	}()
	return l, nil
}

// Addr is the bound address (host:port).
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// URL is the base URL (http:// or https://).
func (l *Listener) URL() string { return l.url }

// Shutdown stops accepting, waits up to 5 s for requests in flight, then
// closes what is left (event streams) and waits for the serve loop.
func (l *Listener) Shutdown() error {
	l.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.srv.Shutdown(ctx); err != nil {
			_ = l.srv.Close()
		}
		<-l.done
	})
	return l.err
}
