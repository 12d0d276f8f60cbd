package tracestore

import (
	"errors"
	"fmt"
	"github.com/fadcedab/adk/internal/coded"
	"time"
)

// Content policies.
const (
	ContentReject = "reject" // any field outside the projection rejects the event (default)
	ContentPrune  = "prune"  // store the projection and mark content_pruned
)

// Options bound the store (CONTRACTS §4). A zero field takes its default;
// a negative value or one above the hard maximum is invalid.
type Options struct {
	MaxEvents             int           // 4096 / 1M
	MaxBytes              int64         // 16 MiB / 1 GiB
	MaxEventBytes         int           // 256 KiB / 16 MiB
	MaxPrincipals         int           // 1024 / 100k
	MaxEventsPerPrincipal int           // min(1024, MaxEvents)
	MaxBytesPerPrincipal  int64         // min(4 MiB, MaxBytes)
	Retention             time.Duration // 5 min / 24 h, measured in stream time
	MaxQueryEvents        int           // min(256, MaxEvents)
	MaxQueryBytes         int           // min(1 MiB, MaxBytes)
	ContentPolicy         string        // reject | prune
	LifecycleReceiverTTL  time.Duration // 24 h (≥ Retention, ≤ 7 d)
	MaxLifecyclePending   int           // 1024 / 4096
	MaxPruneBatch         int           // 1024 / 10k
}

// Hard maxima.
const (
	MaxEventsLimit     = 1_000_000
	MaxBytesLimit      = 1 << 30
	MaxEventBytesLimit = 16 << 20
	MaxPrincipalsLimit = 100_000
	MaxRetention       = 24 * time.Hour
	MaxReceiverTTL     = 7 * 24 * time.Hour
	MaxPendingLimit    = 4096
	MaxPruneBatchLimit = 10_000
)

// resolve fills defaults and checks bounds and cross-constraints.
func (o Options) resolve() (Options, error) {
	bad := func(f, r string) (Options, error) {
		return o, fmt.Errorf("%w: %s %s", ErrInvalidOptions, f, r)
	}
	if o.MaxEvents < 0 || o.MaxBytes < 0 || o.MaxEventBytes < 0 || o.MaxPrincipals < 0 ||
		o.MaxEventsPerPrincipal < 0 || o.MaxBytesPerPrincipal < 0 || o.Retention < 0 ||
		o.MaxQueryEvents < 0 || o.MaxQueryBytes < 0 || o.LifecycleReceiverTTL < 0 ||
		o.MaxLifecyclePending < 0 || o.MaxPruneBatch < 0 {
		return bad("limits", "must not be negative")
	}
	orDefault := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	orDefault(&o.MaxEvents, 4096)
	if o.MaxBytes == 0 {
		o.MaxBytes = 16 << 20
	}
	orDefault(&o.MaxEventBytes, 256<<10)
	orDefault(&o.MaxPrincipals, 1024)
	orDefault(&o.MaxEventsPerPrincipal, min(1024, o.MaxEvents))
	if o.MaxBytesPerPrincipal == 0 {
		o.MaxBytesPerPrincipal = min(4<<20, o.MaxBytes)
	}
	if o.Retention == 0 {
		o.Retention = 5 * time.Minute
	}
	orDefault(&o.MaxQueryEvents, min(256, o.MaxEvents))
	orDefault(&o.MaxQueryBytes, int(min(1<<20, o.MaxBytes)))
	if o.ContentPolicy == "" {
		o.ContentPolicy = ContentReject
	}
	if o.LifecycleReceiverTTL == 0 {
		o.LifecycleReceiverTTL = max(24*time.Hour, o.Retention)
	}
	orDefault(&o.MaxLifecyclePending, 1024)
	orDefault(&o.MaxPruneBatch, 1024)
	switch {
	case o.MaxEvents > MaxEventsLimit:
		return bad("MaxEvents", "above 1000000")
	case o.MaxBytes > MaxBytesLimit:
		return bad("MaxBytes", "above 1 GiB")
	case o.MaxEventBytes > MaxEventBytesLimit:
		return bad("MaxEventBytes", "above 16 MiB")
	case o.MaxPrincipals > MaxPrincipalsLimit:
		return bad("MaxPrincipals", "above 100000")
	case o.Retention > MaxRetention:
		return bad("Retention", "above 24h")
	case o.LifecycleReceiverTTL < o.Retention || o.LifecycleReceiverTTL > MaxReceiverTTL:
		return bad("LifecycleReceiverTTL", "must be between Retention and 7d")
	case o.MaxLifecyclePending > MaxPendingLimit:
		return bad("MaxLifecyclePending", "above 4096")
	case o.MaxPruneBatch > MaxPruneBatchLimit:
		return bad("MaxPruneBatch", "above 10000")
	case o.ContentPolicy != ContentReject && o.ContentPolicy != ContentPrune:
		return bad("ContentPolicy", "must be reject or prune")
	case o.MaxEventsPerPrincipal > o.MaxEvents:
		return bad("MaxEventsPerPrincipal", "above MaxEvents")
	case o.MaxBytesPerPrincipal > o.MaxBytes:
		return bad("MaxBytesPerPrincipal", "above MaxBytes")
	case int64(o.MaxEventBytes) > o.MaxBytesPerPrincipal:
		return bad("MaxEventBytes", "above MaxBytesPerPrincipal")
	case o.MaxEventBytes > o.MaxQueryBytes:
		return bad("MaxEventBytes", "above MaxQueryBytes")
	case int64(o.MaxQueryBytes) > o.MaxBytes:
		return bad("MaxQueryBytes", "above MaxBytes")
	case o.MaxQueryEvents > o.MaxEvents:
		return bad("MaxQueryEvents", "above MaxEvents")
	}
	return o, nil
}

// Stable error codes (CONTRACTS §4), used on the wire and in counters.
const (
	CodeContentRejected      = "trace_content_rejected"
	CodeEventTooLarge        = "trace_event_too_large"
	CodeInputTooLarge        = "trace_event_input_too_large"
	CodeInvalidPrincipal     = "invalid_trace_principal"
	CodeInvalidLifecycle     = "invalid_trace_lifecycle_event"
	CodeInvalidObservability = "invalid_trace_observability_event"
	CodeInvalidSelector      = "invalid_trace_selector"
	CodeInvalidQueryOptions  = "invalid_trace_query_options"
	CodeUnavailable          = "trace_store_unavailable"
	CodeIdentityRequired     = "trace_identity_required"
	CodePrincipalCapacity    = "trace_principal_capacity_reached"
	CodeReplayGap            = "replay_gap"
	CodeCursorAhead          = "cursor_ahead"
	CodeInvalidOptions       = "invalid_trace_store_options"

	CodeLifecycleCapabilityRejected = "lifecycle_capability_rejected"
	CodeLifecycleDeliveryDropped    = "lifecycle_delivery_dropped"
)

// Sentinel errors.
var (
	// ErrInvalidOptions is the contract's invalid_trace_store_options.
	ErrInvalidOptions = errors.New(CodeInvalidOptions)
	// ErrClosed is trace_store_unavailable: the store was closed.
	ErrClosed = &Error{Code: CodeUnavailable}
	// ErrFailed is trace_store_unavailable after a failed write: the
	// store's memory (order indexes, quotas, applied sequence) had moved
	// past what reached the disk, so it applies and answers nothing more
	// until it is reopened, and Open rebuilds it from the disk.
	ErrFailed = &Error{Code: CodeUnavailable, Detail: "a write failed; reopen the store"}
)

// Gap describes a replay gap or a cursor ahead of the stream.
type Gap struct {
	AfterCursor           uint64  `json:"after_cursor" msgpack:"after_cursor"`
	OldestAvailableCursor *uint64 `json:"oldest_available_cursor" msgpack:"oldest_available_cursor"`
	LatestCursor          uint64  `json:"latest_cursor" msgpack:"latest_cursor"`
	EvictedThrough        uint64  `json:"evicted_through" msgpack:"evicted_through"`
}

// Error is a store error with the contract's stable code; Fields.Gap is
// set for replay_gap and cursor_ahead. It never carries event content or a
// principal. It is the module's one coded error (internal/coded), so
// Error(), Is and Unwrap are written once: the message is "code" or
// "code: detail", and errors.Is matches by code.
type Error = coded.Error[ErrorFields]

// ErrorFields is the trace store's own part of an Error (and its coded
// domain): the cursors of a replay gap, or nil.
type ErrorFields struct {
	Gap *Gap
}

// Prefix implements coded.Domain: store codes print bare.
func (ErrorFields) Prefix() string { return "" }

// DetailInParens implements coded.Domain: "code: detail".
func (ErrorFields) DetailInParens() bool { return false }

func errCode(code, detail string) *Error { return &Error{Code: code, Detail: detail} }

// ErrorCode returns the stable code of a store error, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, ErrInvalidOptions) {
		return CodeInvalidOptions
	}
	return ""
}
