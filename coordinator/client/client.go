package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/nats-io/nats.go"
)

// DefaultTimeout bounds one call (CONTRACTS §6: 30 s).
const DefaultTimeout = 30 * time.Second

// Client calls the coordinator service over one NATS connection.
type Client struct {
	nc      *nats.Conn
	timeout time.Duration
	seen    seenIndex // highest Raft index seen: read-your-writes
}

// seenIndex is the highest Raft index a client has seen in a reply, and
// the identity of the cluster whose log issued it (api.Reply.Cluster; ""
// while no reply named one). A reply naming another cluster (the
// coordinators were wiped and bootstrapped again under this client)
// starts it over from that reply's index; a reply naming none (a node of
// an earlier build, a log that recorded none yet) only raises the index,
// as before identities. The clusters it moved on from are remembered
// (left): a node of one of them still answering (not wiped, or not yet
// stopped) answers from a state this client no longer reads.
type seenIndex struct {
	mu      sync.Mutex
	cluster string
	index   uint64
	left    []string // clusters this client moved on from, latest last
}

// maxLeftClusters bounds seenIndex.left.
const maxLeftClusters = 8

// get is the (cluster, index) a request carries.
func (s *seenIndex) get() (string, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cluster, s.index
}

// saw takes in a reply's cluster and index. It reports false, changing
// nothing, for a reply of a cluster this client left: the caller asks
// again rather than answer that cluster's state.
//
// Another identity (the first one included) starts the client over from
// the reply's index: a node naming an identity has applied every index
// issued before it was drawn (a leader draws one after its barrier), so
// when it is the same log nothing seen is lost, and when it is another
// log the old index would be waited for in vain. A reply without an index
// (an error) says nothing about its log and moves nothing.
func (s *seenIndex) saw(cluster string, index uint64) bool {
	if !api.ValidCluster(cluster) {
		cluster = ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case cluster == "" || cluster == s.cluster:
		s.index = max(s.index, index)
	case slices.Contains(s.left, cluster):
		return false
	case index > 0:
		if s.cluster != "" {
			s.left = append(s.left, s.cluster)
			if len(s.left) > maxLeftClusters {
				s.left = slices.Delete(s.left, 0, 1)
			}
		}
		s.cluster, s.index = cluster, index
	}
	return true
}

// readmit forgets that the client left cluster: a call heard only that
// cluster's nodes for its whole timeout, so it is what answers now (an
// operator brought its coordinators back), and the next call takes its
// replies rather than wait for a cluster that is gone.
func (s *seenIndex) readmit(cluster string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.left = slices.DeleteFunc(s.left, func(c string) bool { return c == cluster })
}

// New returns a client; timeout 0 means DefaultTimeout.
func New(nc *nats.Conn, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{nc: nc, timeout: timeout}
}

// Call sends one request and returns the reply, or its *api.Error. No
// responders (no coordinator) is eval_service_unavailable; a deadline is
// timeout.
//
// A request that its coordinator took and never answered (it died) is
// sent again within the call when that is safe (mayRepeat): every
// operation but join, and a submit only with a request id. A request
// answered coordinator_behind (the coordinator had not applied the
// highest index this client has seen, and proposed nothing) is sent
// again, any operation, after a short jittered pause, until another
// answer or the call's timeout: then the answer is that
// coordinator_behind.
func (c *Client) Call(ctx context.Context, op string, req *api.Request) (*api.Reply, error) {
	rep, _, err := c.call(ctx, op, req, 0)
	return rep, err
}

// call is Call; hold is how much longer than FirstRetry a coordinator
// may take to answer an attempt (beyond a status's WaitMS), and again
// reports that the request was sent more than once.
func (c *Client) call(ctx context.Context, op string, req *api.Request, hold time.Duration) (_ *api.Reply, again bool, _ error) {
	subj, err := bus.CoordSubject(op)
	if err != nil {
		return nil, false, err
	}
	if req.MinIndex == 0 {
		req.Cluster, req.MinIndex = c.seen.get()
	}
	b, err := wire.Encode(api.KindRequest, req)
	if err != nil {
		return nil, false, err
	}
	if mp := c.nc.MaxPayload(); mp > 0 && int64(len(b)) > mp {
		// NATS would refuse it as a connection error; say what is too
		// large instead (a submit carries the whole eval set).
		what := "request"
		if req.Submit != nil {
			what = fmt.Sprintf("submit (an eval set of %d bytes)", len(req.Submit.Set))
		}
		return nil, false, api.Errorf(api.CodeRequestLimit, "%s of %d bytes is over the NATS server's max_payload of %d bytes (and submits over %d bytes are refused): split the eval set, or raise max_payload",
			what, len(b), mp, api.MaxRequestBytes)
	}
	// A status that waits (WaitMS) answers that much later at most.
	wait := time.Duration(max(req.WaitMS, 0)) * time.Millisecond
	ctx, cancel := context.WithTimeout(ctx, c.timeout+wait)
	defer cancel()
	var behind *api.Error
	// refused is a cluster this client left whose answer this call
	// refused; taken, that another answer was taken.
	refused, taken := "", false
	giveUp := func(rep *api.Reply) (*api.Reply, bool, error) {
		if refused != "" && !taken {
			c.seen.readmit(refused)
		}
		if rep != nil && refused != "" && rep.Cluster == refused {
			rep = nil
		}
		return rep, again, behind
	}
	for pause := behindFirstPause; ; pause = min(2*pause, behindMaxPause) {
		msg, sentAgain, err := c.request(ctx, subj, b, mayRepeat(op, req), wait+hold)
		again = again || sentAgain
		switch {
		case err != nil && behind != nil && ctx.Err() != nil:
			// Out of time while asking again: the answer is still that
			// the coordinators were behind.
			return giveUp(nil)
		case errors.Is(err, nats.ErrNoResponders):
			return nil, again, api.Errorf(api.CodeServiceUnavailable, "no coordinator")
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
			return nil, again, api.Errorf(api.CodeTimeout, "")
		case err != nil:
			return nil, again, api.Errorf(api.CodeServiceUnavailable, "%v", err)
		}
		var rep api.Reply
		if err := wire.Decode(msg.Data, api.ReplyLimits, api.KindReply, &rep); err != nil {
			return nil, again, err
		}
		if c.seen.saw(rep.Cluster, rep.Index) {
			taken = true
			if rep.Err == nil {
				return &rep, again, nil
			}
			if rep.Err.Code != api.CodeCoordinatorBehind {
				return &rep, again, rep.Err
			}
			// The coordinator that took it had not applied MinIndex (it
			// proposed nothing): ask again, after a pause, within the
			// call's timeout; NATS may hand it to another coordinator, or
			// this one may have caught up.
			behind = rep.Err
		} else {
			// A node of a cluster this client left answered from that
			// cluster's state: ask again as if it were behind, so that
			// the cluster this client moved to answers; a write it may
			// have made there is on a cluster being retired.
			refused = rep.Cluster
			behind = api.Errorf(api.CodeCoordinatorBehind, "a coordinator of cluster %s answered, which this client left when another cluster answered (the coordinators were bootstrapped again)", refused)
		}
		t := time.NewTimer(pause/2 + time.Duration(mrand.Int64N(int64(pause/2)+1)))
		select {
		case <-ctx.Done():
			t.Stop()
			return giveUp(&rep)
		case <-t.C:
		}
	}
}

// The pause before a request answered coordinator_behind is sent again
// (jittered, doubling up to the cap); the answering coordinator already
// waited its own bound (coordinator.Timing.ReadWait) before answering.
const (
	behindFirstPause = 50 * time.Millisecond
	behindMaxPause   = time.Second
)

// mayRepeat reports whether a request may be sent again when no answer
// came (coordinator/DESIGN.md "Request path"): reads change nothing;
// put_set_part stores the same bytes once; put_baseline names the same
// job again; cancel of a job the first attempt cancelled answers
// already_terminal, which Cancel takes for its own success; a submit is
// repeated only with a request id, which makes a coordinator answer the
// job the first attempt created. prune is sent once: a repeat would be
// harmless but its answer would count only its own deletions (0 when the
// first, merely slow, did the work). join is never sent through a Client
// (the joining coordinator retries it itself).
func mayRepeat(op string, req *api.Request) bool {
	switch op {
	case api.OpStatus, api.OpResult, api.OpResultSamples, api.OpListJobs, api.OpGetSet, api.OpListSets, api.OpGetBaseline,
		api.OpListBaselines, api.OpCapabilities, api.OpJobSpec,
		api.OpPutSetPart, api.OpPutBaseline, api.OpCancel:
		return true
	case api.OpSubmit:
		return req.Submit != nil && req.Submit.RequestID != ""
	}
	return false
}

// FirstRetry is how long a request waits for its answer (beyond the time
// a status may be held, api.Request.WaitMS, and the time a large submit
// may take to validate) before it is sent again; each later attempt
// waits twice as long, all within the call's timeout.
const FirstRetry = 2 * time.Second

// request sends one request and waits for its reply until ctx ends. The
// coordinators answer as one queue group: a request taken by one that
// then dies (kill -9, a lost connection) is never answered, and would
// stall its caller for the whole call timeout although the others are
// up. A request that may be repeated is therefore sent again after
// FirstRetry (and wait, the time its answer may take by design), then
// after twice that, and so on: NATS drops a dead member from the group
// at once, so the next attempt reaches a live coordinator. Every attempt
// asks for its answer on one inbox and the first answer to any of them
// is taken: a merely slow coordinator's answer to an earlier attempt is
// not thrown away for a later one (under load that made a submit
// answered after 2.5 s wait for its repeat). Any other request is sent
// once. again reports that it was sent more than once.
func (c *Client) request(ctx context.Context, subj string, b []byte, repeat bool, wait time.Duration) (_ *nats.Msg, again bool, _ error) {
	if !repeat {
		msg, err := c.nc.RequestWithContext(ctx, subj, b)
		return msg, false, err
	}
	sub, err := c.nc.SubscribeSync(c.nc.NewInbox())
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	for attempt := FirstRetry; ; attempt *= 2 {
		if err := c.nc.PublishRequest(subj, sub.Subject, b); err != nil {
			return nil, again, err
		}
		actx, cancel := context.WithTimeout(ctx, wait+attempt)
		msg, err := sub.NextMsgWithContext(actx)
		cancel()
		switch {
		case err == nil && len(msg.Data) == 0 && msg.Header.Get("Status") == "503":
			// The server's answer to a request nobody subscribes to.
			return nil, again, nats.ErrNoResponders
		case err == nil:
			return msg, again, nil
		case ctx.Err() != nil:
			return nil, again, ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded):
			return nil, again, err
		}
		again = true
	}
}

// Submit creates a job (queued or running). The reply has no result. A
// set too large for one request (the NATS server's max_payload, or
// api.MaxRequestBytes) is uploaded first, in parts (UploadSet), and the
// submit names the upload. A submit without a RequestID gets a random
// one, so that it is sent again, not waited out, when the coordinator
// that took it dies: the answer is then the job it created.
func (c *Client) Submit(ctx context.Context, scope string, req api.SubmitRequest) (*evalrecord.Job, error) {
	if req.RequestID == "" {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return nil, err
		}
		req.RequestID = hex.EncodeToString(id[:])
	}
	// The coordinator's validation bound grows with the set
	// (api.SubmitValidationBound): no need to ask again before the part
	// of it that the set's size adds.
	hold := min(api.SubmitValidationBound(0, len(req.Set)), submitHoldMax)
	if len(req.Set) > 0 && req.SetUpload == "" {
		b, err := wire.Encode(api.KindRequest, &api.Request{Scope: scope, Submit: &req})
		if err != nil {
			return nil, err
		}
		limit := int64(api.MaxRequestBytes)
		if mp := c.nc.MaxPayload(); mp > 0 {
			limit = min(limit, mp)
		}
		if int64(len(b)) > limit {
			id, err := c.UploadSet(ctx, scope, req.Set, req.Criteria, req.Options)
			if err != nil {
				return nil, err
			}
			req.Set, req.SetUpload = nil, id
		}
	}
	rep, _, err := c.call(ctx, api.OpSubmit, &api.Request{Scope: scope, Submit: &req}, hold)
	if err != nil {
		return nil, err
	}
	return rep.Job, nil
}

// submitHoldMax bounds the extra wait of a large submit's first attempt
// (the coordinator validates a set for api.MaxSubmitValidation at most
// with its default ValidationTimeout).
const submitHoldMax = 25 * time.Second

// UploadSet sends an eval set (any format evalengine.LoadSet reads) as a
// set upload: validated and encoded here as the canonical JSON the
// coordinator stores (so what is uploaded is what the submit's checks
// digest), then sent in parts of at most api's part bound (and the
// connection's max_payload), each its own Raft entry. It returns the
// upload id for SubmitRequest.SetUpload. An invalid set is refused here,
// with the error a submit would give, before anything is sent.
func (c *Client) UploadSet(ctx context.Context, scope string, set, criteria, options []byte) (string, error) {
	p, err := evalengine.Prepare(set, criteria, options)
	if err != nil {
		return "", err
	}
	body, err := evalengine.EncodeSet(p.Set)
	if err != nil {
		return "", err
	}
	if body, err = canonjson.CanonicalizeOwn(body); err != nil {
		return "", err
	}
	if len(body) > evalrecord.MaxSetUploadBytes {
		return "", api.Errorf(api.CodeRequestLimit, "eval set of %d bytes (canonical JSON) is over the %d bytes of a set upload", len(body), evalrecord.MaxSetUploadBytes)
	}
	part := evalrecord.MaxSetPartBytes
	if mp := c.nc.MaxPayload(); mp > 0 {
		// The request envelope (scope, ids, digest) is well under 16 KiB.
		part = min(part, int(mp)-16<<10)
	}
	parts := (len(body) + part - 1) / part
	if part < 1 || parts > evalrecord.MaxSetParts {
		return "", api.Errorf(api.CodeRequestLimit, "eval set of %d bytes needs %d parts of %d bytes, over %d parts (raise the NATS server's max_payload)", len(body), parts, part, evalrecord.MaxSetParts)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	sum := sha256.Sum256(body)
	sp := api.SetPart{Upload: hex.EncodeToString(id[:]), Parts: parts, Size: int64(len(body)), Digest: hex.EncodeToString(sum[:])}
	for i := 0; i < parts; i++ {
		sp.Part, sp.Data = i, body[i*part:min((i+1)*part, len(body))]
		if _, err := c.Call(ctx, api.OpPutSetPart, &api.Request{Scope: scope, SetPart: &sp}); err != nil {
			return "", err
		}
	}
	return sp.Upload, nil
}

// Status returns the job.
func (c *Client) Status(ctx context.Context, scope, jobID string) (*evalrecord.Job, error) {
	rep, err := c.Call(ctx, api.OpStatus, &api.Request{Scope: scope, JobID: jobID})
	if err != nil {
		return nil, err
	}
	return rep.Job, nil
}

// StatusWait is Status held by the answering coordinator until the job is
// terminal or wait passed (api.Request.WaitMS, at most api.MaxStatusWait):
// a poll every wait learns the job's end when it happens. A coordinator of
// an earlier build answers at once.
func (c *Client) StatusWait(ctx context.Context, scope, jobID string, wait time.Duration) (*evalrecord.Job, error) {
	rep, err := c.Call(ctx, api.OpStatus, &api.Request{Scope: scope, JobID: jobID, WaitMS: wait.Milliseconds()})
	if err != nil {
		return nil, err
	}
	return rep.Job, nil
}

// Result returns a completed job's result JSON; result_not_ready while it
// runs, evaluation_job_terminal (with phase and reason) otherwise. The
// document comes in pages that each fit a NATS message; Result reassembles
// them (at most api.MaxResultDocumentBytes) and checks the SHA-256 the
// coordinator announced, eval_result_digest_mismatch if it differs.
func (c *Client) Result(ctx context.Context, scope, jobID string) ([]byte, error) {
	return c.ResultPaged(ctx, scope, jobID, 0)
}

// ResultStream writes a completed job's result to w as the JSON Lines
// stream `adk eval run --format jsonl` writes (header, samples, case
// lines, summary), of any size: the lines come in pages that each fit a
// NATS message. It returns the lines written. Each serving node checks
// the job's records against the digest the log completed it with before
// answering; ResultStream checks that every page continues the last
// (same digest, line count and order) and that every line was served.
// A job completed before results were kept as records answers
// evaluation_request_invalid: read it with Result.
func (c *Client) ResultStream(ctx context.Context, scope, jobID string, w io.Writer, pageBytes int) (int64, error) {
	next, _, _, err := c.resultLines(ctx, scope, jobID, 0, 0, w, pageBytes)
	return next, err
}

// ResultLines writes lines [from, to) of a completed job's result stream
// (ResultStream's lines; to 0: to its end) to w, with ResultStream's
// checks, and returns the stream's line count and digest. A page that
// passes to is cut there, so a small pageBytes reads one line a page:
// the header is line 0, the summary the last line, and the case lines
// the ones before it, so a reader of the cases skips every sample line.
func (c *Client) ResultLines(ctx context.Context, scope, jobID string, from, to int64, w io.Writer, pageBytes int) (lines int64, digest string, err error) {
	if from < 0 || to < 0 || (to > 0 && to <= from) {
		return 0, "", api.Errorf(api.CodeInvalidRequest, "result lines [%d, %d)", from, to)
	}
	_, lines, digest, err = c.resultLines(ctx, scope, jobID, from, to, w, pageBytes)
	return lines, digest, err
}

// ResultSamples writes the sample lines of tasks (task indexes of a
// completed job whose result is records, 1..api.MaxResultTasks of them)
// to w, in the order named: the lines ResultStream has for them, so a
// reader of one case's samples reads only those (a case's samples are
// tasks case + sample × cases, api.TaskIndex). The lines come in pages
// that each fit a NATS message, any node answering any page; it returns
// the stream's line count and digest, which every page must repeat (a
// reader that read other lines of the stream compares them). A job
// completed before results were kept as records answers
// evaluation_request_invalid; coordinators of an earlier build do not
// serve the operation (eval_service_unavailable, "no coordinator").
func (c *Client) ResultSamples(ctx context.Context, scope, jobID string, tasks []int, w io.Writer) (lines int64, digest string, err error) {
	if len(tasks) < 1 || len(tasks) > api.MaxResultTasks {
		return 0, "", api.Errorf(api.CodeInvalidRequest, "tasks: %d task indexes; a request names 1..%d", len(tasks), api.MaxResultTasks)
	}
	for rest := tasks; len(rest) > 0; {
		rep, err := c.Call(ctx, api.OpResultSamples, &api.Request{Scope: scope, JobID: jobID, Tasks: rest})
		if err != nil {
			return lines, digest, err
		}
		if len(rest) == len(tasks) {
			lines, digest = rep.ResultSize, rep.ResultDigest
		}
		n, err := streamPage(rep, "samples", jobID, lines, digest)
		if err != nil {
			return lines, digest, err
		}
		if n != rep.NextOffset || n > int64(len(rest)) {
			return lines, digest, api.Errorf(api.CodeResultDigestMismatch, "a page of %d lines answers %d of %d tasks", n, rep.NextOffset, len(rest))
		}
		if _, err := w.Write(rep.Result); err != nil {
			return lines, digest, err
		}
		rest = rest[n:]
	}
	return lines, digest, nil
}

// ResultCases writes the case lines of rows from..to-1 of a completed
// records job's failures-first order (the cases that did not pass, then
// those that did, each in case order; at most api.MaxResultCases rows)
// to w, in that order: the lines ResultStream has for those cases, so a
// reader of a page of failed cases reads those lines only. Pages come as
// ResultSamples' do, each repeating the stream's line count and digest,
// which it returns. A job completed before results were kept as records
// answers evaluation_request_invalid; coordinators of an earlier build
// do not serve the operation (eval_service_unavailable, "no
// coordinator").
func (c *Client) ResultCases(ctx context.Context, scope, jobID string, from, to int, w io.Writer) (lines int64, digest string, err error) {
	if from < 0 || to <= from || to-from > api.MaxResultCases {
		return 0, "", api.Errorf(api.CodeInvalidRequest, "rows [%d, %d): a request names 1..%d", from, to, api.MaxResultCases)
	}
	for next := from; next < to; {
		rep, err := c.Call(ctx, api.OpResultCases, &api.Request{Scope: scope, JobID: jobID, Offset: int64(next), Limit: to - next})
		if err != nil {
			return lines, digest, err
		}
		if next == from {
			lines, digest = rep.ResultSize, rep.ResultDigest
		}
		n, err := streamPage(rep, "cases", jobID, lines, digest)
		if err != nil {
			return lines, digest, err
		}
		if rep.NextOffset != int64(next)+n || rep.NextOffset > int64(to) {
			return lines, digest, api.Errorf(api.CodeResultDigestMismatch, "a page of %d lines from row %d ends at %d", n, next, rep.NextOffset)
		}
		if _, err := w.Write(rep.Result); err != nil {
			return lines, digest, err
		}
		next = int(rep.NextOffset)
	}
	return lines, digest, nil
}

// streamPage checks a page of stream lines that ResultSamples or
// ResultCases asked for (what names them in errors): JSON Lines, the
// stream's line count and digest as the first page had them, and at
// whole lines only, at least one. It returns the page's lines; each caller checks
// where the page ends.
func streamPage(rep *api.Reply, what, jobID string, lines int64, digest string) (int64, error) {
	n := int64(bytes.Count(rep.Result, []byte{'\n'}))
	switch {
	case rep.ResultFormat != api.ResultJSONL:
		return 0, api.Errorf(api.CodeResultDigestMismatch, "%s of job %s are not stream lines", what, jobID)
	case rep.ResultSize != lines || rep.ResultDigest != digest:
		return 0, api.Errorf(api.CodeResultDigestMismatch, "result changed between pages")
	case n == 0 || rep.Result[len(rep.Result)-1] != '\n':
		return 0, api.Errorf(api.CodeResultDigestMismatch, "a page of %s of job %s holds no whole line or ends within one", what, jobID)
	}
	return n, nil
}

// resultLines is ResultStream and ResultLines: it returns the line it
// reached (the lines written, from from).
func (c *Client) resultLines(ctx context.Context, scope, jobID string, from, to int64, w io.Writer, pageBytes int) (next, lines int64, digest string, err error) {
	for next = from; ; {
		req := &api.Request{Scope: scope, JobID: jobID, Offset: next, MaxBytes: pageBytes, Format: api.ResultJSONL}
		if to > next {
			// The lines wanted, no more: the node renders only those.
			req.Limit = int(min(to-next, math.MaxInt32))
		}
		rep, err := c.Call(ctx, api.OpResult, req)
		if err != nil {
			return next, lines, digest, err
		}
		first := next == from
		if first {
			lines, digest = rep.ResultSize, rep.ResultDigest
			if to == 0 || to > lines {
				to = lines
			}
		}
		n := int64(bytes.Count(rep.Result, []byte{'\n'}))
		switch {
		case rep.ResultFormat != api.ResultJSONL && first:
			// A coordinator of an earlier build ignores Format.
			return next, lines, digest, api.Errorf(api.CodeInvalidRequest, "job %s: this coordinator does not serve results as streams", jobID)
		case rep.ResultFormat != api.ResultJSONL:
			return next, lines, digest, api.Errorf(api.CodeResultDigestMismatch, "a page of job %s is not a stream", jobID)
		case rep.ResultSize != lines || rep.ResultDigest != digest:
			return next, lines, digest, api.Errorf(api.CodeResultDigestMismatch, "result changed between pages")
		case n == 0 || rep.NextOffset != next+n || rep.NextOffset > lines || rep.Result[len(rep.Result)-1] != '\n':
			return next, lines, digest, api.Errorf(api.CodeResultDigestMismatch, "page at line %d ends at %d with %d lines", next, rep.NextOffset, n)
		}
		page := rep.Result
		if rep.NextOffset > to {
			// Keep the lines before to.
			cut := 0
			for range to - next {
				cut += bytes.IndexByte(page[cut:], '\n') + 1
			}
			page, rep.NextOffset = page[:cut], to
		}
		if _, err := w.Write(page); err != nil {
			return next, lines, digest, err
		}
		next = rep.NextOffset
		if next == to {
			return next, lines, digest, nil
		}
	}
}

// ResultPaged is Result with pages of at most pageBytes (0: the
// coordinator's page size).
func (c *Client) ResultPaged(ctx context.Context, scope, jobID string, pageBytes int) ([]byte, error) {
	var (
		doc    []byte
		size   int64
		digest string
	)
	for offset := int64(0); ; {
		rep, err := c.Call(ctx, api.OpResult, &api.Request{Scope: scope, JobID: jobID, Offset: offset, MaxBytes: pageBytes})
		if err != nil {
			return nil, err
		}
		if offset == 0 {
			size, digest = rep.ResultSize, rep.ResultDigest
			if size < 0 || size > api.MaxResultDocumentBytes {
				return nil, api.Errorf(api.CodeRequestLimit, "result of %d bytes", size)
			}
			doc = make([]byte, 0, size)
		}
		switch {
		case rep.ResultSize != size || rep.ResultDigest != digest:
			return nil, api.Errorf(api.CodeResultDigestMismatch, "result changed between pages")
		case rep.NextOffset != offset+int64(len(rep.Result)) || rep.NextOffset > size:
			return nil, api.Errorf(api.CodeResultDigestMismatch, "page at %d ends at %d with %d bytes", offset, rep.NextOffset, len(rep.Result))
		case len(rep.Result) == 0 && offset < size:
			return nil, api.Errorf(api.CodeResultDigestMismatch, "empty page at %d of %d", offset, size)
		}
		doc = append(doc, rep.Result...)
		offset = rep.NextOffset
		if offset == size {
			break
		}
	}
	sum := sha256.Sum256(doc)
	if hex.EncodeToString(sum[:]) != digest {
		return nil, api.Errorf(api.CodeResultDigestMismatch, "sha-256 of %d bytes", len(doc))
	}
	return doc, nil
}

// Cancel cancels a queued or running job; already_terminal otherwise.
// A cancel sent again (its first coordinator died before answering) that
// finds the job cancelled by a user answers the job, as the first
// attempt would have: that attempt, or another user's cancel, did it.
func (c *Client) Cancel(ctx context.Context, scope, jobID string) (*evalrecord.Job, error) {
	rep, again, err := c.call(ctx, api.OpCancel, &api.Request{Scope: scope, JobID: jobID}, 0)
	var e *api.Error
	if again && errors.As(err, &e) && e.Code == api.CodeAlreadyTerminal &&
		e.Phase == string(evalrecord.PhaseCancelled) && e.Reason == evalrecord.ReasonUserCancelled {
		return c.Status(ctx, scope, jobID)
	}
	if err != nil {
		return nil, err
	}
	return rep.Job, nil
}

// ListJobs pages a scope's jobs.
func (c *Client) ListJobs(ctx context.Context, scope string, limit int, cursor string) (*evalrecord.Page[evalrecord.Job], error) {
	rep, err := c.Call(ctx, api.OpListJobs, &api.Request{Scope: scope, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, err
	}
	return rep.Jobs, nil
}

// GetSet returns one set revision with its canonical body.
func (c *Client) GetSet(ctx context.Context, scope, id, version string) (*evalrecord.SetRecord, error) {
	rep, err := c.Call(ctx, api.OpGetSet, &api.Request{Scope: scope, SetID: id, SetVersion: version})
	if err != nil {
		return nil, err
	}
	return rep.Set, nil
}

// ListSets pages a scope's set revisions.
func (c *Client) ListSets(ctx context.Context, scope string, limit int, cursor string) (*evalrecord.Page[evalrecord.SetRecord], error) {
	rep, err := c.Call(ctx, api.OpListSets, &api.Request{Scope: scope, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, err
	}
	return rep.Sets, nil
}

// PutBaseline names a completed job's result.
func (c *Client) PutBaseline(ctx context.Context, scope, name, jobID string) (*evalrecord.Baseline, error) {
	rep, err := c.Call(ctx, api.OpPutBaseline, &api.Request{Scope: scope, Name: name, JobID: jobID})
	if err != nil {
		return nil, err
	}
	return rep.Baseline, nil
}

// GetBaseline returns a named baseline.
func (c *Client) GetBaseline(ctx context.Context, scope, name string) (*evalrecord.Baseline, error) {
	rep, err := c.Call(ctx, api.OpGetBaseline, &api.Request{Scope: scope, Name: name})
	if err != nil {
		return nil, err
	}
	return rep.Baseline, nil
}

// BaselineRow returns a named baseline without its result document
// (Result is nil): the job it names, its digest and time. A baseline's
// result can be larger than one reply; ResultStream of its job reads the
// same result in pages.
func (c *Client) BaselineRow(ctx context.Context, scope, name string) (*evalrecord.Baseline, error) {
	rep, err := c.Call(ctx, api.OpGetBaseline, &api.Request{Scope: scope, Name: name, WithoutResult: true})
	if err != nil {
		return nil, err
	}
	return rep.Baseline, nil
}

// ListBaselines pages a scope's baselines by name (rows without their
// results; GetBaseline reads one with its result).
func (c *Client) ListBaselines(ctx context.Context, scope string, limit int, cursor string) (*evalrecord.Page[evalrecord.Baseline], error) {
	rep, err := c.Call(ctx, api.OpListBaselines, &api.Request{Scope: scope, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, err
	}
	return rep.Baselines, nil
}

// Prune deletes old, unprotected records of a scope.
func (c *Client) Prune(ctx context.Context, scope string, opts evalrecord.PruneOptions) (*evalrecord.PruneResult, error) {
	rep, err := c.Call(ctx, api.OpPrune, &api.Request{Scope: scope, Prune: &opts})
	if err != nil {
		return nil, err
	}
	return rep.Prune, nil
}

// Capabilities describes the answering coordinator.
func (c *Client) Capabilities(ctx context.Context) (*api.Capabilities, error) {
	rep, err := c.Call(ctx, api.OpCapabilities, &api.Request{Scope: "_"})
	if err != nil {
		return nil, err
	}
	return rep.Caps, nil
}

// OwnerLease renews an owner lease until Stop: jobs submitted with this
// owner are cancelled by the leader when renewals stop for their TTL.
type OwnerLease struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

// KeepOwner starts renewing owner every interval (use TTL/3 or less).
func (c *Client) KeepOwner(owner string, interval time.Duration) (*OwnerLease, error) {
	subj, err := bus.OwnerSubject(owner)
	if err != nil {
		return nil, err
	}
	b, err := wire.Encode(api.KindOwner, &api.OwnerRenew{Owner: owner})
	if err != nil {
		return nil, err
	}
	l := &OwnerLease{stop: make(chan struct{})}
	_ = c.nc.Publish(subj, b)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				_ = c.nc.Publish(subj, b)
			}
		}
	}()
	return l, nil
}

// Stop ends the renewals (the owner "dies").
func (l *OwnerLease) Stop() {
	close(l.stop)
	l.wg.Wait()
}
