package devapi

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds one readiness check.
const readyTimeout = 5 * time.Second

// Health is the body of /healthz and /readyz.
type Health struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

func (s *Server) healthz(w http.ResponseWriter, _ *call) *Error {
	return s.writeJSON(w, http.StatusOK, Health{Status: "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, c *call) *Error {
	return writeReady(w, c.r, s.o.Ready)
}

func writeReady(w http.ResponseWriter, r *http.Request, ready func(context.Context) error) *Error {
	setSecurityHeaders(w.Header())
	h := Health{Status: "ready"}
	status := http.StatusOK
	if ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		err := ready(ctx)
		cancel()
		if err != nil {
			h, status = Health{Status: "not_ready", Reason: err.Error()}, http.StatusServiceUnavailable
		}
	}
	s := &Server{}
	return s.writeJSON(w, status, h)
}

// OpsOptions configure an operations handler.
type OpsOptions struct {
	// Ready answers /readyz (nil: always ready).
	Ready func(ctx context.Context) error
	// Gatherer is served at /metrics (nil: the Go and process
	// collectors only).
	Gatherer prometheus.Gatherer
}

// NewRegistry returns a registry with the Go runtime and process
// collectors, the base every process's /metrics starts from.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// OpsHandler serves /healthz (the process is alive), /readyz (Ready)
// and /metrics (Prometheus text format): what every adk process serves
// on --metrics-addr. No token: bind it to loopback or a private network.
func OpsHandler(o OpsOptions) http.Handler {
	g := o.Gatherer
	if g == nil {
		g = NewRegistry()
	}
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		_ = (&Server{}).writeJSON(w, http.StatusOK, Health{Status: "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		_ = writeReady(w, r, o.Ready)
	})
	return mux
}
