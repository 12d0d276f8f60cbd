package coordinator

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/internal/jsonlimit"
	"github.com/fadcedab/adk/internal/secrets"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/nats-io/nats.go/micro"
)

// ServiceName is the micro service every coordinator registers.
const ServiceName = "adk-coord"

// service serves adk.coord.v1.* on one node. Reads answer from the local
// store (a follower may lag by a few entries); writes go through propose.
// Submits are validated by at most MaxPendingSubmits goroutines, off the
// endpoint's subscription goroutine and off the Raft apply path, so status
// calls keep answering under a flood of large submissions.
type service struct {
	n       *Node
	svc     micro.Service
	slots   chan struct{}
	pending atomic.Int64
	wg      sync.WaitGroup // submit goroutines

	digestMu sync.Mutex
	digests  map[string]string // job id -> SHA-256 hex of its (immutable) result
	records  recordCache       // reading results kept as records
	tails    *tailCache        // result tails (tails.go)

	// waiters bounds the status calls held for their job's end
	// (api.Request.WaitMS), each on its own goroutine; quit ends them.
	waiters chan struct{}
	quit    chan struct{}
}

// maxStatusWaiters bounds the status calls a node holds at once; past it
// a status answers at once, as without WaitMS (the caller polls again).
const maxStatusWaiters = 256

func startService(n *Node) (*service, error) {
	s := &service{n: n, slots: make(chan struct{}, n.cfg.Limits.MaxPendingSubmits), digests: map[string]string{},
		waiters: make(chan struct{}, maxStatusWaiters), quit: make(chan struct{}), tails: n.tails}
	svc, err := micro.AddService(n.nc, micro.Config{
		Name:        ServiceName,
		Version:     "1.0.0",
		Description: "adk eval coordinator",
		QueueGroup:  ServiceName,
		Metadata:    map[string]string{"node": n.cfg.ID},
	})
	if err != nil {
		return nil, fmt.Errorf("coordinator service: %w", err)
	}
	s.svc = svc
	g := svc.AddGroup(bus.CoordSubjectPrefix[:len(bus.CoordSubjectPrefix)-1])
	ops := map[string]func(*api.Request) *api.Reply{
		api.OpResult: s.result, api.OpResultSamples: s.resultSamples, api.OpResultCases: s.resultCases, api.OpCancel: s.cancel,
		api.OpListJobs: s.listJobs, api.OpGetSet: s.getSet, api.OpListSets: s.listSets,
		api.OpPutBaseline: s.putBaseline, api.OpGetBaseline: s.getBaseline, api.OpListBaselines: s.listBaselines, api.OpPrune: s.prune,
		api.OpCapabilities: s.capabilities, api.OpJobSpec: s.jobSpec, api.OpJoin: s.join,
	}
	for _, op := range n.cfg.WithoutOps {
		delete(ops, op)
	}
	for op, h := range ops {
		h := h
		if err := g.AddEndpoint(op, micro.HandlerFunc(func(r micro.Request) { s.serve(r, h) })); err != nil {
			_ = svc.Stop()
			return nil, err
		}
	}
	if err := g.AddEndpoint(api.OpSubmit, micro.HandlerFunc(s.submit)); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	if err := g.AddEndpoint(api.OpStatus, micro.HandlerFunc(s.statusEndpoint)); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// A part is up to MaxSetPartBytes: decoded under the submit's limits.
	if err := g.AddEndpoint(api.OpPutSetPart, micro.HandlerFunc(func(r micro.Request) {
		req, err := decodeRequest(r.Data(), api.RequestLimits)
		if err != nil {
			s.respond(r, fail(err))
			return
		}
		s.respond(r, s.putSetPart(req))
	})); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runTailBuilder()
	}()
	return s, nil
}

func (s *service) stop() {
	_ = s.svc.Stop()
	close(s.quit)
	s.wg.Wait()
}

// respond sends rep, naming this node's cluster (api.Reply.Cluster).
func (s *service) respond(r micro.Request, rep *api.Reply) {
	if !s.n.cfg.earlierBuild {
		rep.Cluster = s.n.fsm.Cluster()
	}
	b, err := wire.Encode(api.KindReply, rep)
	if err != nil {
		b, _ = wire.Encode(api.KindReply, &api.Reply{Err: api.Errorf(api.CodeInternal, "encode reply")})
	}
	_ = r.Respond(b)
}

func fail(err error) *api.Reply { return &api.Reply{Err: api.AsError(err)} }

func decodeRequest(data []byte, lim wire.DecodeLimits) (*api.Request, error) {
	var req api.Request
	if err := wire.Decode(data, lim, api.KindRequest, &req); err != nil {
		var we *wire.WireError
		if errors.As(err, &we) && we.Code == wire.CodeTooLarge {
			return nil, api.Errorf(api.CodeRequestLimit, "request")
		}
		return nil, api.Errorf(api.CodeInvalidRequest, "%v", err)
	}
	if err := evalstore.ValidScope(req.Scope); err != nil {
		return nil, err
	}
	if !api.ValidCluster(req.Cluster) {
		return nil, api.Errorf(api.CodeInvalidRequest, "cluster: want at most %d bytes of [A-Za-z0-9_-], got %d bytes", api.MaxClusterBytes, len(req.Cluster))
	}
	return &req, nil
}

func (s *service) serve(r micro.Request, h func(*api.Request) *api.Reply) {
	req, err := decodeRequest(r.Data(), api.SmallLimits)
	if err != nil {
		s.respond(r, fail(err))
		return
	}
	s.respond(r, h(req))
}

func (s *service) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.n.ctx, 30*time.Second)
}

// submit: bounded validation, then one Raft command that stores the set
// revision and the job atomically and admits it.
func (s *service) submit(r micro.Request) {
	select {
	case s.slots <- struct{}{}:
	default:
		s.respond(r, fail(api.Errorf(api.CodeValidationBusy, "")))
		return
	}
	s.pending.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		release := func() { s.pending.Add(-1); <-s.slots }
		cmd, err := s.validate(r.Data(), release)
		if err != nil {
			s.respond(r, fail(err))
			return
		}
		ctx, cancel := s.ctx()
		defer cancel()
		res, err := s.n.propose(ctx, cmdSubmit, cmd)
		if err != nil {
			s.respond(r, fail(err))
			return
		}
		s.respond(r, &api.Reply{Job: res.Job, Index: res.Index})
	}()
}

// validate runs the checks in their own goroutine bounded by
// validationBound; release frees the slot when that goroutine ends (not
// at the timeout), so the slot count is the real work in progress.
func (s *service) validate(data []byte, release func()) (*submitCmd, error) {
	type out struct {
		cmd *submitCmd
		err error
	}
	bound, err := s.validationBound(data)
	if err != nil {
		release()
		return nil, err
	}
	deadline := time.Now().Add(bound)
	ch := make(chan out, 1)
	go func() {
		defer release()
		defer func() {
			if p := recover(); p != nil {
				ch <- out{err: api.Errorf(api.CodeValidationFailed, "panic")}
			}
		}()
		cmd, err := s.buildSubmit(data, deadline)
		ch <- out{cmd, err}
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case o := <-ch:
		return o.cmd, o.err
	case <-t.C:
		return nil, api.Errorf(api.CodeValidationTimeout, "")
	}
}

// validationBound is api.SubmitValidationBound of ValidationTimeout and
// the submit's set: its bytes inline, or the size of the set upload it
// names. A submit that reads this node's store (a request id this node
// may know, a set upload) first waits for its MinIndex, as a read does
// (coordinator_behind), before its bound starts: the wait does not eat
// the validation's time.
func (s *service) validationBound(data []byte) (time.Duration, error) {
	d := s.n.cfg.Limits.ValidationTimeout
	req, err := decodeRequest(data, api.RequestLimits)
	if err != nil || req.Submit == nil {
		return d, nil
	}
	if req.Submit.RequestID != "" || req.Submit.SetUpload != "" {
		if err := s.awaitRequest(req); err != nil {
			return 0, err
		}
	}
	size := int64(len(req.Submit.Set))
	if req.Submit.SetUpload != "" {
		_ = s.n.store.View(func(tx *evalstore.Tx) error {
			size = tx.UploadSize(req.Scope, req.Submit.SetUpload)
			return nil
		})
	}
	return api.SubmitValidationBound(d, int(min(size, evalrecord.MaxSetUploadBytes))), nil
}

// buildSubmit validates a submit; deadline is validate's bound, which the
// set's decode gets what is left of.
func (s *service) buildSubmit(data []byte, deadline time.Time) (*submitCmd, error) {
	if len(data) > api.MaxRequestBytes {
		return nil, api.Errorf(api.CodeRequestLimit, "request")
	}
	req, err := decodeRequest(data, api.RequestLimits)
	if err != nil {
		return nil, err
	}
	sub := req.Submit
	var digest string
	if sub != nil && sub.RequestID != "" {
		if !evalrecord.ValidRequestID(sub.RequestID) {
			return nil, api.Errorf(api.CodeInvalidRequest, "submit.request_id: want %d..%d bytes of [A-Za-z0-9_-], got %d bytes",
				evalrecord.MinRequestIDBytes, evalrecord.MaxRequestIDBytes, len(sub.RequestID))
		}
		digest = submitDigest(req.Scope, sub)
		// Sent again after a coordinator took it and died: when this
		// node knows the id, the log answers its job (or a conflict)
		// without validating the set again. (validationBound waited for
		// MinIndex.)
		known := false
		_ = s.n.store.View(func(tx *evalstore.Tx) error {
			_, known, _ = tx.Request(req.Scope, sub.RequestID, time.Now().UnixMilli())
			return nil
		})
		if known {
			return lookupCmd(req.Scope, sub, digest), nil
		}
	}
	if sub != nil && sub.SetUpload != "" {
		if len(sub.Set) > 0 {
			return nil, api.Errorf(api.CodeInvalidRequest, "set and set_upload: give one")
		}
		// The upload's parts were applied at the index the client last
		// saw (MinIndex): validationBound waited for it, as a read does.
		gone := false
		err := s.n.store.View(func(tx *evalstore.Tx) (err error) {
			gone = tx.UploadSize(req.Scope, sub.SetUpload) == 0
			sub.Set, _, err = tx.Upload(req.Scope, sub.SetUpload)
			return err
		})
		if err != nil && gone && sub.RequestID != "" {
			// A submit taking it may be in the log, not yet applied
			// here: the log says.
			return lookupCmd(req.Scope, sub, digest), nil
		}
		if err != nil {
			return nil, err
		}
	}
	if sub == nil || len(sub.Set) == 0 {
		return nil, api.Errorf(api.CodeInvalidRequest, "set is required")
	}
	if err := bus.ValidToken(sub.Agent); err != nil {
		return nil, api.Errorf(api.CodeUnknownAgent, "agent must be a configured agent name")
	}
	left := time.Until(deadline)
	if left <= 0 {
		return nil, api.Errorf(api.CodeValidationTimeout, "")
	}
	p, err := evalengine.PrepareWithin(sub.Set, sub.Criteria, sub.Options, left)
	if err != nil {
		return nil, err
	}
	body, err := evalengine.EncodeSet(p.Set)
	if err != nil {
		return nil, err
	}
	if body, err = canonjson.CanonicalizeOwn(body); err != nil {
		return nil, err
	}
	if sub.SetUpload != "" && !bytes.Equal(body, sub.Set) {
		return nil, api.Errorf(evalrecord.CodeInvalidSetUpload, "set_upload: not the canonical JSON of the set (upload what evalengine.EncodeSet writes, canonicalized)")
	}
	if err := validNotEvaluated(sub.NotEvaluated, p.Set); err != nil {
		return nil, err
	}
	var meta []byte
	if len(sub.Metadata) > 0 {
		if len(sub.Metadata) > api.MaxMetadataBytes {
			return nil, api.Errorf(api.CodeRequestLimit, "metadata")
		}
		v, err := jsonlimit.Decode(sub.Metadata, jsonlimit.Limits{MaxBytes: api.MaxMetadataBytes})
		if err != nil {
			return nil, api.Errorf(api.CodeInvalidRequest, "metadata: %v", err)
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, api.Errorf(api.CodeInvalidRequest, "metadata must be an object")
		}
		if meta, err = canonjson.Marshal(secrets.Prune(v)); err != nil {
			return nil, err
		}
	}
	opts, err := evalengine.EncodeOptions(p.Options)
	if err != nil {
		return nil, err
	}
	var ownerTTL int64
	if sub.Owner != "" {
		if err := bus.ValidToken(sub.Owner); err != nil {
			return nil, api.Errorf(api.CodeInvalidRequest, "owner: %v", err)
		}
		ownerTTL = sub.OwnerTTLMS
		if ownerTTL > api.MaxOwnerTTL.Milliseconds() {
			return nil, api.Errorf(api.CodeInvalidRequest, "owner_ttl_ms: above %d", api.MaxOwnerTTL.Milliseconds())
		}
		if ownerTTL <= 0 {
			ownerTTL = s.n.cfg.Limits.DefaultOwnerTTL.Milliseconds()
		}
	}
	lim := s.n.cfg.Limits
	// A task may wait in its worker's prefetch for up to two samples
	// (worker.MaxPrefetchFactor) before its own case timeout starts.
	taskTTL := min(lim.TaskTimeout.Milliseconds(), 3*int64(p.Options.CaseTimeoutMS)+s.n.cfg.Timing.TaskAckWait.Milliseconds())
	now := time.Now().UnixMilli()
	set := evalrecord.SetRecord{Scope: req.Scope, ID: p.Set.ID, Version: p.Set.Version,
		Digest: canonjson.DigestBytes(body), Body: body, CreatedAt: now}
	job := evalrecord.Job{
		JobID: newJobID(), Scope: req.Scope, EvalSetID: p.Set.ID, EvalSetVersion: p.Set.Version, Metadata: meta,
		Spec: evalrecord.JobSpec{SetDigest: set.Digest, Agent: sub.Agent, Options: opts, Criteria: sub.Criteria,
			Owner: sub.Owner, OwnerTTLMS: ownerTTL, TaskTTLMS: taskTTL, JobTTLMS: min(int64(p.Options.TimeoutMS), lim.JobTimeout.Milliseconds()),
			Cases: len(p.Set.Cases), Samples: p.Options.Samples, NotEvaluated: sub.NotEvaluated},
	}
	cmd := &submitCmd{Set: set, Job: job, Adm: s.n.admission(), Now: now, RequestID: sub.RequestID, RequestDigest: digest}
	if sub.SetUpload != "" {
		// Every node takes the bytes from its own store; the entry
		// carries the digest they must have.
		cmd.Set.Body, cmd.SetUpload = nil, sub.SetUpload
	}
	return cmd, nil
}

// lookupCmd is a submit that only answers the job its request id made
// (submitCmd.Lookup).
func lookupCmd(scope string, sub *api.SubmitRequest, digest string) *submitCmd {
	return &submitCmd{Set: evalrecord.SetRecord{Scope: scope}, Job: evalrecord.Job{Scope: scope}, Now: time.Now().UnixMilli(),
		SetUpload: sub.SetUpload, RequestID: sub.RequestID, RequestDigest: digest, Lookup: true}
}

// submitDigest is the SHA-256 (hex) of a submit's content as the client
// sent it (a set upload by its id), every field length-prefixed: a submit
// sent again carries the same bytes, so the same digest; any other
// content under the same request id is a conflict. A field added to
// api.SubmitRequest is appended here.
func submitDigest(scope string, sub *api.SubmitRequest) string {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(scope))
	field(sub.Set)
	field([]byte(sub.SetUpload))
	field([]byte(sub.Agent))
	field(sub.Criteria)
	field(sub.Options)
	field(sub.Metadata)
	field([]byte(sub.Owner))
	binary.BigEndian.PutUint64(n[:], uint64(sub.OwnerTTLMS))
	h.Write(n[:])
	binary.BigEndian.PutUint64(n[:], uint64(len(sub.NotEvaluated)))
	h.Write(n[:])
	for _, c := range sub.NotEvaluated {
		field([]byte(c.CaseID))
		field([]byte(c.Reason))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// validNotEvaluated checks a submit's not_evaluated cases: within
// api.MaxNotEvaluatedBytes, each a non-empty id once, none a case of the
// set, each reason a lower-case token (an evalengine not_evaluated
// reason) of at most 64 bytes.
func validNotEvaluated(ne []evalrecord.NotEvaluated, set *evalengine.Set) error {
	if len(ne) == 0 {
		return nil
	}
	in := make(map[string]bool, len(set.Cases)+len(ne))
	for _, c := range set.Cases {
		in[c.ID] = true
	}
	size := 0
	for i, c := range ne {
		size += len(c.CaseID) + len(c.Reason)
		switch {
		case size > api.MaxNotEvaluatedBytes:
			return api.Errorf(api.CodeRequestLimit, "not_evaluated: over %d bytes", api.MaxNotEvaluatedBytes)
		case c.CaseID == "":
			return api.Errorf(api.CodeInvalidRequest, "not_evaluated[%d].case_id: empty", i)
		case in[c.CaseID]:
			return api.Errorf(api.CodeInvalidRequest, "not_evaluated[%d].case_id: %q is a case of the set, or listed twice", i, c.CaseID)
		case !reasonToken(c.Reason):
			return api.Errorf(api.CodeInvalidRequest, "not_evaluated[%d].reason: want a lower-case token of 1..64 bytes", i)
		}
		in[c.CaseID] = true
	}
	return nil
}

func reasonToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// awaitRequest is awaitApplied of req.MinIndex, an index of the log of
// the cluster req.Cluster names. An index of another cluster's log (this
// cluster was wiped and bootstrapped again under a long-lived client)
// says nothing about this log: req drops it and is answered from what
// this node holds, and the reply's Cluster tells the client to start
// over from this log's indexes. A node or a request without a cluster
// (earlier builds, a log that recorded none yet) waits as before.
func (s *service) awaitRequest(req *api.Request) error {
	if req.Cluster != "" && !s.n.cfg.earlierBuild {
		if own := s.n.fsm.Cluster(); own != "" && own != req.Cluster {
			s.n.log.Debug("request names another cluster's raft index: answered from this one", "index", req.MinIndex)
			req.MinIndex, req.Cluster = 0, ""
		}
	}
	return s.awaitApplied(req.MinIndex)
}

// awaitApplied waits until this node applied index, woken by each apply
// (FSM.applied), for at most Timing.ReadWait; then, or when the node
// stops, it answers coordinator_behind naming both indexes: a request
// carrying the caller's last seen index is never answered from older
// state.
func (s *service) awaitApplied(index uint64) error {
	if index <= s.n.store.AppliedIndex() {
		return nil
	}
	t := time.NewTimer(s.n.cfg.Timing.ReadWait)
	defer t.Stop()
	for {
		next := s.n.fsm.applied.wait()
		have := s.n.store.AppliedIndex()
		if index <= have {
			return nil
		}
		select {
		case <-next:
			continue
		case <-t.C:
		case <-s.n.ctx.Done():
		}
		return api.Errorf(api.CodeCoordinatorBehind, "coordinator %s has applied raft index %d, the request wants %d (within %s)",
			s.n.cfg.ID, s.n.store.AppliedIndex(), index, s.n.cfg.Timing.ReadWait)
	}
}

// putSetPart proposes one part of a set upload, checked first on its own
// (evalstore.CheckSetPart; the apply checks it against the upload).
func (s *service) putSetPart(req *api.Request) *api.Reply {
	if req.SetPart == nil {
		return fail(api.Errorf(api.CodeInvalidRequest, "set_part is required"))
	}
	p := evalstore.SetPart(*req.SetPart)
	if err := evalstore.CheckSetPart(&p); err != nil {
		return fail(err)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	res, err := s.n.propose(ctx, cmdSetPart, &setPartCmd{Scope: req.Scope, Part: p, Now: time.Now().UnixMilli()})
	if err != nil {
		return fail(err)
	}
	return &api.Reply{Index: res.Index}
}

func (n *Node) admission() evalstore.Admission {
	l := n.cfg.Limits
	return evalstore.Admission{MaxConcurrency: l.MaxConcurrency, MaxQueue: l.MaxQueue, MaxQueueBytes: l.MaxQueueBytes}
}

// newClusterID draws a cluster identity (leaseCmd.Cluster).
func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "eval-" + hex.EncodeToString(b[:])
}

// view answers a read from the local store, after waiting (bounded) for
// this node to apply req.MinIndex: a client that wrote through the leader
// reads its write on any follower, or gets coordinator_behind.
func (s *service) view(req *api.Request, fn func(tx *evalstore.Tx) (*api.Reply, error)) *api.Reply {
	if err := s.awaitRequest(req); err != nil {
		return fail(err)
	}
	var rep *api.Reply
	err := s.n.store.View(func(tx *evalstore.Tx) (err error) { rep, err = fn(tx); return err })
	if err != nil {
		return fail(err)
	}
	rep.Index = s.n.store.AppliedIndex()
	return rep
}

// statusEndpoint answers status; one with WaitMS is held on its own
// goroutine (the endpoint's subscription goroutine never blocks) until
// the job is terminal here or WaitMS passed (statusWait).
func (s *service) statusEndpoint(r micro.Request) {
	req, err := decodeRequest(r.Data(), api.SmallLimits)
	if err != nil {
		s.respond(r, fail(err))
		return
	}
	if req.WaitMS < 0 || req.WaitMS > api.MaxStatusWait.Milliseconds() {
		s.respond(r, fail(api.Errorf(api.CodeInvalidRequest, "wait_ms: %d is not in 0..%d", req.WaitMS, api.MaxStatusWait.Milliseconds())))
		return
	}
	if req.WaitMS == 0 {
		s.respond(r, s.status(req))
		return
	}
	select {
	case s.waiters <- struct{}{}:
	default:
		s.respond(r, s.status(req)) // too many held: answer now
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.waiters }()
		s.respond(r, s.statusWait(req, time.Duration(req.WaitMS)*time.Millisecond))
	}()
}

// statusWait answers status once the job is terminal on this node, or
// after wait with the job as it is. It re-reads the job whenever this
// node's FSM ended a job (FSM.ended), so the answer leaves as soon as the
// ending entry is applied here.
func (s *service) statusWait(req *api.Request, wait time.Duration) *api.Reply {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		ended := s.n.fsm.ended.wait()
		rep := s.status(req)
		if rep.Err != nil || rep.Job == nil || rep.Job.Phase.Terminal() {
			return rep
		}
		select {
		case <-ended:
		case <-t.C:
			return s.status(req)
		case <-s.quit:
			return rep
		}
	}
}

func (s *service) status(req *api.Request) *api.Reply {
	return s.view(req, func(tx *evalstore.Tx) (*api.Reply, error) {
		j, err := tx.GetJob(req.Scope, req.JobID)
		return &api.Reply{Job: j}, err
	})
}

func (s *service) result(req *api.Request) *api.Reply {
	return s.view(req, func(tx *evalstore.Tx) (*api.Reply, error) {
		j, err := tx.GetJob(req.Scope, req.JobID)
		if err != nil {
			return nil, err
		}
		switch {
		case j.Phase == evalrecord.PhaseCompleted && j.ResultFormat == evalrecord.ResultRecords:
			return s.recordsResult(tx, req, j)
		case j.Phase == evalrecord.PhaseCompleted && req.Format == api.ResultJSONL:
			return nil, api.Errorf(api.CodeInvalidRequest, "job %s completed before results were kept as records: read it as one document", j.JobID)
		case j.Phase == evalrecord.PhaseCompleted:
			res, err := tx.Result(j.JobID)
			if err != nil {
				return nil, err
			}
			return s.resultPage(req, j, res)
		case !j.Phase.Terminal():
			return nil, api.Errorf(api.CodeResultNotReady, "")
		default:
			return nil, &api.Error{Code: api.CodeJobTerminal, Phase: string(j.Phase), Reason: j.Reason}
		}
	})
}

// Result pages. A reply must fit the NATS server's max_payload (1 MiB by
// default) while a 10,000-sample result is several MiB, so a result
// answers one page of at most resultPageBytes (and the connection's
// max_payload less resultPageHeadroom for the reply's other fields).
const (
	resultPageBytes    = 1 << 20
	resultPageHeadroom = 16 << 10
	minResultPageBytes = 4 << 10
	maxCachedDigests   = 256
)

// pageLimit is the page size for a request asking for maxBytes (0: the
// largest that fits).
func (s *service) pageLimit(maxBytes int) int {
	limit := resultPageBytes
	if s.n.nc != nil { // nil: a test of the pages, without NATS
		if mp := int(s.n.nc.MaxPayload()); mp > 0 {
			limit = min(limit, max(mp-resultPageHeadroom, minResultPageBytes))
		}
	}
	if maxBytes > 0 {
		limit = min(limit, maxBytes)
	}
	return limit
}

// resultPage answers bytes [req.Offset, req.Offset+page) of a job's result
// with its total size and SHA-256, which the client checks once it has
// reassembled every page (pages may come from different nodes).
func (s *service) resultPage(req *api.Request, j *evalrecord.Job, res []byte) (*api.Reply, error) {
	if req.Offset < 0 || req.Offset > int64(len(res)) || req.MaxBytes < 0 {
		return nil, api.Errorf(api.CodeInvalidRequest, "result offset %d / max_bytes %d outside a %d-byte result", req.Offset, req.MaxBytes, len(res))
	}
	digest, err := s.resultDigest(j, res)
	if err != nil {
		return nil, err
	}
	end := min(int64(len(res)), req.Offset+int64(s.pageLimit(req.MaxBytes)))
	return &api.Reply{Result: res[req.Offset:end], NextOffset: end, ResultSize: int64(len(res)),
		ResultDigest: digest}, nil
}

// resultDigest hashes a result once (a completed job's result never
// changes, and a job id is never reused) and checks it against the digest
// the job recorded from the Raft log: bytes that differ are never served.
func (s *service) resultDigest(j *evalrecord.Job, res []byte) (string, error) {
	s.digestMu.Lock()
	d, ok := s.digests[j.JobID]
	s.digestMu.Unlock()
	if !ok {
		sum := sha256.Sum256(res)
		d = hex.EncodeToString(sum[:])
		s.digestMu.Lock()
		if len(s.digests) >= maxCachedDigests {
			clear(s.digests)
		}
		s.digests[j.JobID] = d
		s.digestMu.Unlock()
	}
	if j.ResultDigest != "" && d != j.ResultDigest {
		return "", api.Errorf(api.CodeResultDigestMismatch, "coordinator %s holds a result of job %s with sha-256 %s; the log says %s", s.n.cfg.ID, j.JobID, d, j.ResultDigest)
	}
	return d, nil
}

// join adds a coordinator to the Raft configuration through the leader.
// Who may publish here is a NATS permission (coordinators only); the
// leader also checks the id against its coordinator allowlist.
func (s *service) join(req *api.Request) *api.Reply {
	if err := validJoin(req.Join); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(s.n.ctx, joinRequestTimeout)
	defer cancel()
	ms, idx, err := s.n.joinViaLeader(ctx, req.Join)
	if err != nil {
		return fail(err)
	}
	return &api.Reply{Members: ms, Index: idx}
}

func (s *service) cancel(req *api.Request) *api.Reply {
	ctx, cancel := s.ctx()
	defer cancel()
	for attempt := 0; attempt < 3; attempt++ {
		rep := s.status(req)
		if rep.Err != nil {
			return rep
		}
		j := rep.Job
		if j.Phase.Terminal() {
			return fail(&api.Error{Code: api.CodeAlreadyTerminal, Phase: string(j.Phase), Reason: j.Reason})
		}
		now := time.Now().UnixMilli()
		res, err := s.n.propose(ctx, cmdTransition, &transitionCmd{Scope: req.Scope, JobID: req.JobID,
			Expected: []evalrecord.Phase{j.Phase}, To: evalrecord.PhaseCancelled,
			Patch: evalstore.Patch{FinishedAt: now, Reason: evalrecord.ReasonUserCancelled}, Adm: s.n.admission(), Now: now})
		if errors.Is(err, evalrecord.ErrStalePhase) {
			// The job moved meanwhile: read again, at least as new as the leader.
			if res != nil && res.Index > req.MinIndex {
				req.MinIndex = res.Index
			}
			continue
		}
		if err != nil {
			return fail(err)
		}
		return &api.Reply{Job: res.Job, Index: res.Index}
	}
	return fail(evalrecord.ErrStalePhase)
}

func (s *service) listJobs(req *api.Request) *api.Reply {
	return s.view(req, func(tx *evalstore.Tx) (*api.Reply, error) {
		p, err := tx.ListJobs(req.Scope, req.Limit, req.Cursor)
		return &api.Reply{Jobs: p}, err
	})
}

func (s *service) getSet(req *api.Request) *api.Reply {
	return s.view(req, func(tx *evalstore.Tx) (*api.Reply, error) {
		st, err := tx.GetSet(req.Scope, req.SetID, req.SetVersion)
		if err == nil && len(st.Body) > s.pageLimit(0) {
			// An uploaded set can be larger than any reply.
			return nil, api.Errorf(api.CodeRequestLimit, "set revision of %d bytes is over a reply's %d bytes (it was uploaded in parts; workers read it in pages)", len(st.Body), s.pageLimit(0))
		}
		return &api.Reply{Set: st}, err
	})
}

func (s *service) listSets(req *api.Request) *api.Reply {
	return s.view(req, func(tx *evalstore.Tx) (*api.Reply, error) {
		p, err := tx.ListSets(req.Scope, req.Limit, req.Cursor)
		return &api.Reply{Sets: p}, err
	})
}

func (s *service) putBaseline(req *api.Request) *api.Reply {
	ctx, cancel := s.ctx()
	defer cancel()
	res, err := s.n.propose(ctx, cmdBaseline, &baselineCmd{Scope: req.Scope, Name: req.Name, JobID: req.JobID, Now: time.Now().UnixMilli()})
	if err != nil {
		return fail(err)
	}
	b := res.Baseline
	if b != nil && len(b.Result) > s.replyLimit() {
		// Stored; the copy is too large to answer (get_baseline says so,
		// and the job's result reads in pages).
		row := *b
		row.Result = nil
		b = &row
	}
	return &api.Reply{Baseline: b, Index: res.Index}
}

// replyLimit is how many result bytes a reply may carry besides its
// other fields: the connection's max_payload less resultPageHeadroom
// (a baseline copies a result of up to 16 MiB; a reply over max_payload
// would never be sent, and the caller would wait out its timeout).
func (s *service) replyLimit() int {
	if mp := int(s.n.nc.MaxPayload()); mp > 0 {
		return max(mp-resultPageHeadroom, minResultPageBytes)
	}
	return resultPageBytes
}

func (s *service) getBaseline(req *api.Request) *api.Reply {
	return s.view(req, func(tx *evalstore.Tx) (*api.Reply, error) {
		b, err := tx.GetBaseline(req.Scope, req.Name)
		switch {
		case err != nil:
			return nil, err
		case req.WithoutResult:
			b.Result = nil
		case len(b.Result) > s.replyLimit():
			return nil, api.Errorf(api.CodeRequestLimit, "baseline %q holds a result of %d bytes, over a reply's %d bytes: read the result of job %s (in pages)",
				b.Name, len(b.Result), s.replyLimit(), b.JobID)
		}
		return &api.Reply{Baseline: b}, nil
	})
}

func (s *service) listBaselines(req *api.Request) *api.Reply {
	return s.view(req, func(tx *evalstore.Tx) (*api.Reply, error) {
		p, err := tx.ListBaselines(req.Scope, req.Limit, req.Cursor)
		return &api.Reply{Baselines: p}, err
	})
}

func (s *service) prune(req *api.Request) *api.Reply {
	if req.Prune == nil {
		return fail(api.Errorf(evalrecord.CodeInvalidPruneOptions, "before is required"))
	}
	ctx, cancel := s.ctx()
	defer cancel()
	res, err := s.n.propose(ctx, cmdPrune, &pruneCmd{Scope: req.Scope, Opts: *req.Prune})
	if err != nil {
		return fail(err)
	}
	return &api.Reply{Prune: res.Prune, Index: res.Index}
}

func (s *service) capabilities(*api.Request) *api.Reply {
	c := api.Capabilities{ContractVersion: api.ContractVersion, NodeID: s.n.cfg.ID, Leader: s.n.Leader(),
		MaxConcurrency: s.n.cfg.Limits.MaxConcurrency, MaxQueue: s.n.cfg.Limits.MaxQueue,
		PendingSubmissions: int(s.pending.Load()), Workers: append([]string{}, s.n.cfg.Workers...),
		RejectedResults: s.n.rejected.Load(), Transport: "nats",
		Cancellation: "owner_bound_remote_kill", Replay: "never"}
	if ms, err := s.n.Members(); err == nil {
		c.Members = ms
	}
	c.CommitIndex, c.AppliedIndex = s.n.RaftIndexes()
	if !s.n.cfg.earlierBuild {
		c.Cluster = s.n.fsm.Cluster()
	}
	c.WorkerStates = s.n.live.states(s.n.cfg.Workers, time.Now())
	c.Agents = s.n.liveAgents(time.Now())
	err := s.n.store.View(func(tx *evalstore.Tx) error {
		counts, err := tx.Counts()
		c.ActiveJobs, c.QueuedJobs, c.QueuedBytes, c.RecoveredJobs = counts.Active, counts.Queued, counts.QueuedBytes, counts.Recovered
		return err
	})
	if err != nil {
		return fail(err)
	}
	return &api.Reply{Caps: &c}
}

func (s *service) jobSpec(req *api.Request) *api.Reply {
	return s.view(req, func(tx *evalstore.Tx) (*api.Reply, error) {
		j, err := tx.JobByID(req.JobID)
		if err != nil {
			return nil, err
		}
		st, err := tx.GetSet(j.Scope, j.EvalSetID, j.EvalSetVersion)
		if err != nil {
			return nil, err
		}
		spec := &api.JobSpec{JobID: j.JobID, Scope: j.Scope, Set: st.Body, Agent: j.Spec.Agent,
			Options: j.Spec.Options, Criteria: j.Spec.Criteria}
		// A set larger than a reply (an upload) goes in pages; a small
		// one whole, as before.
		page := max(s.pageLimit(0)-len(spec.Options)-len(spec.Criteria)-4096, 64<<10)
		if len(st.Body) > page || req.Offset > 0 {
			if req.Offset < 0 || req.Offset > int64(len(st.Body)) {
				return nil, api.Errorf(api.CodeInvalidRequest, "offset: 0..%d", len(st.Body))
			}
			end := min(req.Offset+int64(page), int64(len(st.Body)))
			spec.Set, spec.SetSize, spec.SetDigest = st.Body[req.Offset:end], int64(len(st.Body)), st.Digest
		}
		return &api.Reply{Spec: spec}, nil
	})
}

// StatusWaiters counts the status calls this node holds for their job's
// end (api.Request.WaitMS).
func (n *Node) StatusWaiters() int {
	if n.svc == nil {
		return 0
	}
	return len(n.svc.waiters)
}
