package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fadcedab/adk/bus/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// SignalStreamName is the JetStream stream that carries observability
// signal batches.
const SignalStreamName = "ADK_SIGNALS"

// SignalBatchKind is the wire kind of one signal batch message.
const SignalBatchKind = "signal_batch"

// Record kinds inside a signal batch (the trace store's event kinds).
const (
	RecordObservability     = "observability"      // a v1 envelope or a v2 span, JSON
	RecordWorkflowLifecycle = "workflow_lifecycle" // a workflow-lifecycle v1 event, JSON
)

// Defaults of the ADK_SIGNALS stream limits. The stream is a buffer in
// front of the store nodes, not a second copy of their data: store nodes
// hold the history, the stream holds what they may still need to replay
// (their lag, and a restart's catch-up), so MaxBytes bounds it well below
// a store's size (bus/DESIGN.md, "How long the stream holds").
const (
	// DefaultSignalMaxBytes is 32 MiB of compressed batches: the ~700k
	// spans the old 256 MiB held before publishers compressed.
	DefaultSignalMaxBytes   int64 = 32 << 20
	DefaultSignalMaxMsgs    int64 = 1_000_000
	DefaultSignalMaxAge           = 24 * time.Hour
	DefaultSignalMaxMsgSize int32 = 1 << 20
	// DefaultSignalCompression is none: publishers compress each batch
	// once, at the source (SignalEncodingS2), so the servers store and
	// replicate compressed bytes already; S2 on the stream's file blocks
	// would compress them a second time for nothing but CPU
	// (bus/DESIGN.md, "Signal batch encoding").
	DefaultSignalCompression = SignalCompressionNone
)

// Compression of the ADK_SIGNALS file blocks (SignalStreamConfig.Compression).
const (
	SignalCompressionS2   = "s2"
	SignalCompressionNone = "none"
)

// SignalStreamConfig bounds the ADK_SIGNALS stream. Zero fields take the
// defaults above; Replicas must be 1 or 3 (0 means 1).
type SignalStreamConfig struct {
	MaxBytes   int64
	MaxMsgs    int64
	MaxAge     time.Duration
	MaxMsgSize int32
	Replicas   int
	// DiscardNew rejects publishes once a limit is reached (the publisher
	// counts them); the default discards the oldest messages silently.
	DiscardNew bool
	// Compression of the stream's file blocks: SignalCompressionNone
	// (the default when empty) or SignalCompressionS2. Limits count
	// message bytes as published (a compressed batch by its compressed
	// size), before any block compression.
	Compression string
}

func (c SignalStreamConfig) resolve() (SignalStreamConfig, error) {
	if c.MaxBytes < 0 || c.MaxMsgs < 0 || c.MaxAge < 0 || c.MaxMsgSize < 0 {
		return c, &ConfigError{Field: "SignalStreamConfig", Reason: "limits must not be negative"}
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultSignalMaxBytes
	}
	if c.MaxMsgs == 0 {
		c.MaxMsgs = DefaultSignalMaxMsgs
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultSignalMaxAge
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = DefaultSignalMaxMsgSize
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas != 1 && c.Replicas != 3 {
		return c, &ConfigError{Field: "Replicas", Reason: "must be 1 or 3"}
	}
	if c.Compression == "" {
		c.Compression = DefaultSignalCompression
	}
	if c.Compression != SignalCompressionS2 && c.Compression != SignalCompressionNone {
		return c, &ConfigError{Field: "Compression", Reason: `must be "s2" or "none"`}
	}
	return c, nil
}

// StreamConfig is the JetStream configuration EnsureSignalStream creates.
func (c SignalStreamConfig) StreamConfig() (jetstream.StreamConfig, error) {
	c, err := c.resolve()
	if err != nil {
		return jetstream.StreamConfig{}, err
	}
	discard := jetstream.DiscardOld
	if c.DiscardNew {
		discard = jetstream.DiscardNew
	}
	compression := jetstream.S2Compression
	if c.Compression == SignalCompressionNone {
		compression = jetstream.NoCompression
	}
	return jetstream.StreamConfig{
		Name:        SignalStreamName,
		Subjects:    []string{SignalSubjectPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxBytes:    c.MaxBytes,
		MaxMsgs:     c.MaxMsgs,
		MaxAge:      c.MaxAge,
		MaxMsgSize:  c.MaxMsgSize,
		Replicas:    c.Replicas,
		Discard:     discard,
		Duplicates:  2 * time.Minute,
		Compression: compression,
	}, nil
}

// StreamMismatchError reports an existing stream whose configuration differs
// from the requested one. The stream is left unchanged.
type StreamMismatchError struct {
	Stream string
	Field  string
	Have   string
	Want   string
}

// Error implements error.
func (e *StreamMismatchError) Error() string {
	return fmt.Sprintf("bus: stream %s exists with %s=%s, want %s", e.Stream, e.Field, e.Have, e.Want)
}

// Unwrap makes errors.Is(err, ErrStreamMismatch) true.
func (e *StreamMismatchError) Unwrap() error { return ErrStreamMismatch }

// EnsureSignalStream creates ADK_SIGNALS, or verifies that the existing
// stream has the requested configuration. Its bounds and compression
// (max_bytes, max_msgs, max_age, max_msg_size, discard, compression) are
// operator settings: when only they differ the stream is updated in place,
// keeping its messages and sequence numbers (the store nodes' cursors).
// Any other difference (subjects, retention, storage, replicas) is a
// *StreamMismatchError and the stream is left unchanged.
func EnsureSignalStream(ctx context.Context, js jetstream.JetStream, c SignalStreamConfig) (jetstream.Stream, error) {
	want, err := c.StreamConfig()
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = js.CreateStream(ctx, want)
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("bus: create stream %s: %w", want.Name, err)
		}
		st, err = js.Stream(ctx, want.Name) // lost a creation race: verify theirs
	}
	if err != nil {
		return nil, fmt.Errorf("bus: look up stream %s: %w", want.Name, err)
	}
	have := st.CachedInfo().Config
	if err := compareStreamIdentity(have, want); err != nil {
		return nil, err
	}
	if compareStreamBounds(have, want) == nil {
		return st, nil
	}
	// Only the bounds differ. Keep what the stream has that this package
	// does not set (e.g. a description an operator added).
	upd := have
	upd.MaxBytes, upd.MaxMsgs, upd.MaxAge, upd.MaxMsgSize = want.MaxBytes, want.MaxMsgs, want.MaxAge, want.MaxMsgSize
	upd.Discard, upd.Compression = want.Discard, want.Compression
	if st, err = js.UpdateStream(ctx, upd); err != nil {
		return nil, fmt.Errorf("bus: update the bounds of stream %s: %w", want.Name, err)
	}
	return st, nil
}

func checkField(stream, field string, h, w any) error {
	if fmt.Sprint(h) != fmt.Sprint(w) {
		return &StreamMismatchError{Stream: stream, Field: field, Have: fmt.Sprint(h), Want: fmt.Sprint(w)}
	}
	return nil
}

// compareStreamIdentity compares what cannot change under the store nodes.
func compareStreamIdentity(have, want jetstream.StreamConfig) error {
	return errors.Join(
		checkField(want.Name, "subjects", strings.Join(have.Subjects, ","), strings.Join(want.Subjects, ",")),
		checkField(want.Name, "retention", have.Retention, want.Retention),
		checkField(want.Name, "storage", have.Storage, want.Storage),
		checkField(want.Name, "replicas", have.Replicas, want.Replicas),
	)
}

// compareStreamBounds compares what EnsureSignalStream updates in place.
func compareStreamBounds(have, want jetstream.StreamConfig) error {
	return errors.Join(
		checkField(want.Name, "max_bytes", have.MaxBytes, want.MaxBytes),
		checkField(want.Name, "max_msgs", have.MaxMsgs, want.MaxMsgs),
		checkField(want.Name, "max_age", have.MaxAge, want.MaxAge),
		checkField(want.Name, "max_msg_size", have.MaxMsgSize, want.MaxMsgSize),
		checkField(want.Name, "discard", have.Discard, want.Discard),
		checkField(want.Name, "compression", have.Compression, want.Compression),
	)
}

// SignalRecord is one signal inside a batch: its record kind and its JSON
// document (a v1 envelope, a v2 span or a workflow-lifecycle event).
type SignalRecord struct {
	Kind string `msgpack:"k"`
	Data []byte `msgpack:"d"`
}

// SignalBatch is the body of one ADK_SIGNALS message. The principal is not
// in the body: it is the last token of the subject, which the NATS server's
// publish permissions bind to the publishing user.
type SignalBatch struct {
	Records []SignalRecord `msgpack:"r"`
}

// SignalBatchSubject is the subject a principal's batches are published on:
// adk.signal.<principal>. The principal must be a valid subject token.
func SignalBatchSubject(principal string) (string, error) { return SignalSubject(principal) }

// PrincipalFromSubject returns the principal token of a signal subject.
func PrincipalFromSubject(subject string) (string, error) {
	p, ok := strings.CutPrefix(subject, SignalSubjectPrefix)
	if !ok {
		return "", fmt.Errorf("%w: not a signal subject", ErrInvalidToken)
	}
	if err := ValidToken(p); err != nil {
		return "", err
	}
	return p, nil
}

// EncodeSignalBatch wire-encodes a batch: the bytes of
// wire.Encode(SignalBatchKind, b), written without reflection.
func EncodeSignalBatch(b SignalBatch) ([]byte, error) {
	return appendSignalBatch(make([]byte, 0, signalBatchSize(b.Records)), b.Records), nil
}

// DecodeSignalBatch decodes a plain batch envelope within the given message
// size bound, accepting and rejecting exactly what wire.Decode does. The
// records' data alias data. A consumer of ADK_SIGNALS calls
// DecodeSignalMessage, which also reads the compressed bodies publishers
// send.
func DecodeSignalBatch(data []byte, maxBytes int) (SignalBatch, error) {
	lim := wire.DecodeLimits{MaxBytes: maxBytes}
	if b, ok := decodeCanonicalSignalBatch(data, lim.Resolved()); ok {
		return b, nil
	}
	var b SignalBatch
	err := wire.Decode(data, lim, SignalBatchKind, &b)
	return b, err
}

// Signal bus errors.
var (
	// ErrStreamMismatch is wrapped by every *StreamMismatchError.
	ErrStreamMismatch = errors.New("bus: stream configuration mismatch")
	// ErrQueueFull is the contract's queue_full: the publisher's queue is at
	// its item or byte bound and the drop policy refused the signal.
	ErrQueueFull = errors.New("queue_full")
	// ErrSignalDropped reports a signal dropped by the drop_newest policy.
	ErrSignalDropped = errors.New("signal_dropped")
	// ErrSignalTooLarge reports a signal larger than MaxEventBytes.
	ErrSignalTooLarge = errors.New("signal_too_large")
	// ErrPublisherClosed reports an Enqueue after Close.
	ErrPublisherClosed = errors.New("publisher_closed")
	// ErrDrainTimeout is the contract's drain_timeout.
	ErrDrainTimeout = errors.New("drain_timeout")
	// ErrDrainWaiterLimit is the contract's drain_waiter_limit.
	ErrDrainWaiterLimit = errors.New("drain_waiter_limit")
)

// SignalPublisherUser returns a NATS user that may publish signal batches
// only under its own principal (adk.signal.<principal>) and receive only
// replies (publish acks) on its inbox. This is what binds a publisher to
// its principal: the store trusts the subject, and the server enforces it.
func SignalPublisherUser(name, password, principal string) (User, error) {
	subj, err := SignalBatchSubject(principal)
	if err != nil {
		return User{}, err
	}
	return User{Name: name, Password: password, PublishAllow: []string{subj}, SubscribeAllow: []string{"_INBOX.>"}}, nil
}
