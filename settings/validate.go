package settings

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/store/tracestore"
)

// Validate checks every key against its bounds and the cross-constraints
// between keys. The first violation is returned as an *Error naming the
// key; identity keys (ids, addresses, agents) are checked by the command
// that uses them, since each role needs only its own.
func (f File) Validate() error {
	v := &validator{}
	v.oneOf("log.level", f.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", f.Log.Format, "text", "json")
	v.durRange("log.signal_warn_interval", f.Log.SignalWarnInterval, MinSignalWarnInterval, MaxSignalWarnInterval)

	c := f.Coordinator
	v.intRange("coordinator.replicas", int64(c.Replicas), 1, 3)
	if c.Replicas == 2 {
		v.fail("coordinator.replicas", "must be 1 or 3")
	}
	v.intRange("coordinator.max_running_jobs", int64(c.MaxRunningJobs), 1, MaxRunningJobs)
	v.intRange("coordinator.max_queued_jobs", int64(c.MaxQueuedJobs), 0, MaxQueuedJobs)
	v.intRange("coordinator.max_queued_bytes", c.MaxQueuedBytes, 1, MaxQueuedBytes)
	v.intRange("coordinator.max_pending_submits", int64(c.MaxPendingSubmits), 1, MaxPendingSubmits)
	v.durRange("coordinator.task_timeout", c.TaskTimeout, time.Millisecond, MaxTaskTimeout)
	v.durRange("coordinator.job_timeout", c.JobTimeout, time.Second, MaxJobTimeout)
	tails := make([]string, len(coordinator.ResultTailsValues))
	for i, t := range coordinator.ResultTailsValues {
		tails[i] = string(t)
	}
	v.oneOf("coordinator.result_tails", c.ResultTails, tails...)
	e := c.EvalStore
	v.intRange("coordinator.eval_store.max_sets", int64(e.MaxSets), 1, MaxEvalStoreCount)
	v.intRange("coordinator.eval_store.max_jobs", int64(e.MaxJobs), 1, MaxEvalStoreCount)
	v.intRange("coordinator.eval_store.max_baselines", int64(e.MaxBaselines), 1, MaxEvalStoreCount)
	v.intRange("coordinator.eval_store.max_page_limit", int64(e.MaxPageLimit), 1, maxPageLimitBound)
	v.intRange("coordinator.eval_store.max_prune_limit", int64(e.MaxPruneLimit), 1, maxPruneLimitBound)
	v.intRange("coordinator.eval_store.max_record_bytes", e.MaxRecordBytes, 1<<10, MaxEvalStoreBytes)
	v.intRange("coordinator.eval_store.max_scope_bytes", e.MaxScopeBytes, 1<<10, MaxEvalStoreBytes)
	v.intRange("coordinator.eval_store.max_total_bytes", e.MaxTotalBytes, 1<<10, MaxEvalStoreBytes)
	v.check(e.MaxRecordBytes <= e.MaxScopeBytes, "coordinator.eval_store.max_record_bytes", "must not exceed coordinator.eval_store.max_scope_bytes")
	v.check(e.MaxScopeBytes <= e.MaxTotalBytes, "coordinator.eval_store.max_scope_bytes", "must not exceed coordinator.eval_store.max_total_bytes")
	// A queued job's record is charged to the store: a queue that may hold
	// more bytes than the store can is a limit that never applies.
	v.check(c.MaxQueuedBytes <= e.MaxTotalBytes, "coordinator.max_queued_bytes", "must not exceed coordinator.eval_store.max_total_bytes")

	v.intRange("worker.capacity", int64(f.Worker.Capacity), 1, MaxWorkerCapacity)
	for name, p := range f.Worker.Agents {
		v.check(name != "" && p != "", "worker.agents", "every entry is NAME: PATH, both non-empty")
	}

	s := f.Store
	v.intRange("store.max_events", int64(s.MaxEvents), 1, tracestore.MaxEventsLimit)
	v.intRange("store.max_bytes", s.MaxBytes, 1, tracestore.MaxBytesLimit)
	v.intRange("store.max_event_bytes", int64(s.MaxEventBytes), 1, tracestore.MaxEventBytesLimit)
	v.intRange("store.max_principals", int64(s.MaxPrincipals), 1, tracestore.MaxPrincipalsLimit)
	v.intRange("store.max_events_per_principal", int64(s.MaxEventsPerPrincipal), 1, tracestore.MaxEventsLimit)
	v.intRange("store.max_bytes_per_principal", s.MaxBytesPerPrincipal, 1, tracestore.MaxBytesLimit)
	v.durRange("store.retention", s.Retention, MinRetention, tracestore.MaxRetention)
	v.oneOf("store.content_policy", s.ContentPolicy, tracestore.ContentReject, tracestore.ContentPrune)
	v.intRange("store.max_query_events", int64(s.MaxQueryEvents), 1, tracestore.MaxEventsLimit)
	v.intRange("store.max_query_bytes", int64(s.MaxQueryBytes), 1, tracestore.MaxBytesLimit)
	v.check(s.MaxEventsPerPrincipal <= s.MaxEvents, "store.max_events_per_principal", "must not exceed store.max_events")
	v.check(s.MaxBytesPerPrincipal <= s.MaxBytes, "store.max_bytes_per_principal", "must not exceed store.max_bytes")
	v.check(int64(s.MaxEventBytes) <= s.MaxBytesPerPrincipal, "store.max_event_bytes", "must not exceed store.max_bytes_per_principal")
	v.check(s.MaxEventBytes <= s.MaxQueryBytes, "store.max_event_bytes", "must not exceed store.max_query_bytes")
	v.check(int64(s.MaxQueryBytes) <= s.MaxBytes, "store.max_query_bytes", "must not exceed store.max_bytes")
	v.check(s.MaxQueryEvents <= s.MaxEvents, "store.max_query_events", "must not exceed store.max_events")

	g := f.Signals
	v.intRange("signals.max_bytes", g.MaxBytes, 1<<20, MaxSignalBytes)
	v.intRange("signals.max_msgs", g.MaxMsgs, 1, MaxSignalMsgs)
	v.durRange("signals.max_age", g.MaxAge, MinSignalMaxAge, MaxSignalMaxAge)
	v.intRange("signals.max_msg_size", int64(g.MaxMsgSize), 1<<10, MaxSignalMsgSize)
	v.check(g.Replicas == 1 || g.Replicas == 3, "signals.replicas", "must be 1 or 3")
	v.oneOf("signals.compression", g.Compression, bus.SignalCompressionS2, bus.SignalCompressionNone)
	v.check(int64(g.MaxMsgSize) <= g.MaxBytes, "signals.max_msg_size", "must not exceed signals.max_bytes")

	v.intRange("serve.port", int64(f.Serve.Port), -1, 65535)
	v.intRange("serve.worker_capacity", int64(f.Serve.WorkerCapacity), 1, MaxWorkerCapacity)

	v.listen("coordinator", f.Coordinator.Listen, nil)
	v.listen("worker", f.Worker.Listen, nil)
	v.listen("store", f.Store.Listen, nil)
	v.listen("serve", f.Serve.Listen, &f.Serve.HTTPAPI)
	v.listen("api", f.API.Listen, &f.API.HTTPAPI)
	if v.err == nil {
		return nil // not a typed nil in a non-nil interface
	}
	return v.err
}

type validator struct{ err *Error }

func (v *validator) fail(key, reason string) {
	if v.err == nil {
		v.err = &Error{Key: key, Reason: reason}
	}
}

func (v *validator) check(ok bool, key, reason string) {
	if !ok {
		v.fail(key, reason)
	}
}

func (v *validator) intRange(key string, n, lo, hi int64) {
	v.check(n >= lo && n <= hi, key, fmt.Sprintf("must be %d..%d", lo, hi))
}

func (v *validator) durRange(key string, d Duration, lo, hi time.Duration) {
	v.check(d.D() >= lo && d.D() <= hi, key, fmt.Sprintf("must be %s..%s", lo, hi))
}

func (v *validator) oneOf(key, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	v.fail(key, "must be one of "+strings.Join(allowed, ", "))
}

// listen checks a section's HTTP listener keys: host:port addresses, the
// TLS pair both-or-neither, no plain HTTP on a non-loopback address
// without insecure_listen, and the API's bounds.
func (v *validator) listen(sec string, l Listen, api *HTTPAPI) {
	v.check(len(l.TLSCert) <= MaxPathBytes, sec+".tls_cert", fmt.Sprintf("at most %d bytes", MaxPathBytes))
	v.check(len(l.TLSKey) <= MaxPathBytes, sec+".tls_key", fmt.Sprintf("at most %d bytes", MaxPathBytes))
	v.check((l.TLSCert == "") == (l.TLSKey == ""), sec+".tls_cert", "goes with "+sec+".tls_key: give both or neither")
	addrs := []struct{ key, addr string }{{sec + ".metrics_addr", l.MetricsAddr}}
	if api != nil {
		addrs = append(addrs, struct{ key, addr string }{sec + ".http_addr", api.HTTPAddr})
	}
	for _, a := range addrs {
		if a.addr == "" {
			continue // off
		}
		v.check(validAddr(a.addr), a.key, fmt.Sprintf("want host:port with a port 0..65535 (e.g. 127.0.0.1:9090), at most %d bytes", MaxAddrBytes))
		v.check(devapi.IsLoopback(a.addr) || l.TLSCert != "" || l.InsecureListen, a.key,
			"a non-loopback address needs "+sec+".tls_cert and "+sec+".tls_key, or "+sec+".insecure_listen")
	}
	if api == nil {
		return
	}
	v.intRange(sec+".max_report_bytes", int64(api.MaxReportBytes), 1, MaxReportBytes)
	v.intRange(sec+".report_spool_bytes", api.ReportSpoolBytes, devapi.MinReportSpoolBytes, devapi.MaxReportSpoolBytes)
	v.check(len(api.AllowedOrigins) <= MaxAllowedOrigins, sec+".allowed_origins", fmt.Sprintf("at most %d origins", MaxAllowedOrigins))
	for _, o := range api.AllowedOrigins {
		v.check(validOrigin(o), sec+".allowed_origins", "every entry is scheme://host[:port] with scheme http or https")
	}
}

func validAddr(addr string) bool {
	if len(addr) > MaxAddrBytes {
		return false
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}

func validOrigin(o string) bool {
	if len(o) > MaxAddrBytes {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Path == "" &&
		u.RawQuery == "" && u.Fragment == "" && u.User == nil
}
