package coordinator

import (
	"bytes"
	"fmt"
	"github.com/klauspost/compress/s2"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/vmihailenco/msgpack/v5"
)

// cmdType is the first byte of every Raft log entry; the msgpack body
// follows (nomad style). New types are only ever appended, below 0x80
// (the high bit flags a compressed body).
type cmdType byte

const (
	cmdSubmit     cmdType = 1 // create set revision + job, admission
	cmdAssign     cmdType = 2 // dispatch tasks to workers
	cmdFinish     cmdType = 3 // task outcomes (results, lost, timeouts), fenced
	cmdTransition cmdType = 4 // job phase CAS (cancel, complete, fail, timeout)
	cmdLease      cmdType = 5 // coordinator lease renewal
	cmdRecover    cmdType = 6 // full-restart recovery: fail active jobs
	cmdBaseline   cmdType = 7 // put_baseline
	cmdPrune      cmdType = 8 // prune
	cmdSetPart    cmdType = 9 // one part of a set upload
)

func (c cmdType) String() string {
	switch c {
	case cmdSubmit:
		return "submit"
	case cmdAssign:
		return "assign"
	case cmdFinish:
		return "finish"
	case cmdTransition:
		return "transition"
	case cmdLease:
		return "lease"
	case cmdRecover:
		return "recover"
	case cmdBaseline:
		return "baseline"
	case cmdPrune:
		return "prune"
	case cmdSetPart:
		return "set_part"
	}
	return fmt.Sprintf("cmd(%d)", byte(c))
}

// Every command carries Now (epoch ms), chosen by the proposer: the FSM
// never reads the clock.

type submitCmd struct {
	Set evalrecord.SetRecord `msgpack:"set"`
	Job evalrecord.Job       `msgpack:"job"`
	Adm evalstore.Admission  `msgpack:"adm"`
	Now int64                `msgpack:"now"`
	// SetUpload names the set upload whose bytes are Set.Body (left
	// empty in the entry): every node takes them from its own store,
	// checked against Set.Digest.
	SetUpload string `msgpack:"set_upload,omitempty"`
	// RequestID names the submit (api.SubmitRequest.RequestID) and
	// RequestDigest is its content's (submitDigest): a submit whose id
	// the store remembers answers that id's job, or a conflict, instead
	// of creating one (evalstore.SubmittedJob).
	RequestID     string `msgpack:"request_id,omitempty"`
	RequestDigest string `msgpack:"request_digest,omitempty"`
	// Lookup carries no job: it only answers the job RequestID made. The
	// validating node proposes one when it cannot build the job again
	// (the set upload was taken by the first submit) or need not (it
	// already knows the id); through the log it is ordered after the
	// submit it looks for.
	Lookup bool `msgpack:"lookup,omitempty"`
}

type setPartCmd struct {
	Scope string            `msgpack:"scope"`
	Part  evalstore.SetPart `msgpack:"part"`
	Now   int64             `msgpack:"now"`
}

type assignCmd struct {
	As  []evalstore.Assignment `msgpack:"as"`
	Now int64                  `msgpack:"now"`
}

type finishCmd struct {
	Outs []evalstore.Outcome `msgpack:"outs"`
	Now  int64               `msgpack:"now"`
}

type transitionCmd struct {
	Scope    string              `msgpack:"scope"`
	JobID    string              `msgpack:"job"`
	Expected []evalrecord.Phase  `msgpack:"expected,omitempty"`
	To       evalrecord.Phase    `msgpack:"to"`
	Patch    evalstore.Patch     `msgpack:"patch"`
	Adm      evalstore.Admission `msgpack:"adm"` // promotes queued jobs when one ends
	Now      int64               `msgpack:"now"`

	timing *completeTiming // the leader's own, for its log; never encoded
	doc    []byte          // the leader's build of the result; never encoded
}

type leaseCmd struct {
	Lease evalrecord.Lease `msgpack:"lease"`
	// Cluster, when set, is an identity for the cluster, drawn by a leader
	// whose store holds none (its first lease): the FSM records it, the
	// last one applied holding (evalstore.Tx.SetCluster). Earlier builds
	// skip the field.
	Cluster string `msgpack:"cluster,omitempty"`
}

type recoverCmd struct {
	Reason string `msgpack:"reason"`
	Now    int64  `msgpack:"now"`
}

type baselineCmd struct {
	Scope string `msgpack:"scope"`
	Name  string `msgpack:"name"`
	JobID string `msgpack:"job"`
	Now   int64  `msgpack:"now"`
}

type pruneCmd struct {
	Scope string                  `msgpack:"scope"`
	Opts  evalrecord.PruneOptions `msgpack:"opts"`
}

// applyResult is what Apply returns (ApplyFuture.Response) and what a
// forwarded apply carries back.
type applyResult struct {
	Err       *api.Error              `msgpack:"err,omitempty"`
	Job       *evalrecord.Job         `msgpack:"job,omitempty"`
	Accepted  []bool                  `msgpack:"accepted,omitempty"`
	Baseline  *evalrecord.Baseline    `msgpack:"baseline,omitempty"`
	Prune     *evalrecord.PruneResult `msgpack:"prune,omitempty"`
	Recovered int                     `msgpack:"recovered,omitempty"`
	Index     uint64                  `msgpack:"index,omitempty"` // set by applyLocal

	// kills are the in-flight tasks, by worker, of the jobs the entry
	// ended (a transition or a recovery): the leader's kill notices
	// (applyLocal). Never encoded: a forwarded apply's notices leave from
	// the leader.
	kills map[string][]api.TaskRef
}

// A command whose body is at least compressAbove bytes is stored
// S2-compressed, flagged by cmdCompressed in its type byte: a finish of a
// thousand samples is mostly repeated JSON keys, and every byte of an
// entry is encoded, copied into bolt and sent to each follower.
const (
	compressAbove        = 4 << 10
	cmdCompressed   byte = 0x80
	maxCommandBytes      = 64 << 20 // a decompressed body; far above any command we write
)

func encodeCmd(t cmdType, body any) ([]byte, error) {
	// Sized up front: a finish carries a thousand samples (and a
	// completing transition of an older log the whole result), and
	// growing the buffer copied them several times.
	buf := bytes.NewBuffer(make([]byte, 0, 1+sizeHint(body)))
	buf.WriteByte(byte(t))
	enc := msgpack.NewEncoder(buf)
	if err := enc.Encode(body); err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	entry := buf.Bytes()
	if b := entry[1:]; len(b) >= compressAbove {
		dst := make([]byte, 1+s2.MaxEncodedLen(len(b)))
		dst[0] = byte(t) | cmdCompressed
		enc := s2.Encode(dst[1:], b)
		// Trimmed: the log cache holds entries.
		return append([]byte(nil), dst[:1+len(enc)]...), nil
	}
	return entry, nil
}

// sizeHint estimates a command's encoded size.
func sizeHint(body any) int {
	n := 256
	switch c := body.(type) {
	case *finishCmd:
		for _, o := range c.Outs {
			n += len(o.Sample) + len(o.JobID) + len(o.Worker) + len(o.Tag) + 48
		}
	case *transitionCmd:
		n += len(c.Patch.Result) + len(c.Patch.Reason)
	case *assignCmd:
		for _, a := range c.As {
			n += len(a.JobID) + len(a.Worker) + 24
		}
	case *setPartCmd:
		n += len(c.Part.Data)
	}
	return n
}

// decodeCmd splits a log entry into its type and plain body.
func decodeCmd(data []byte) (cmdType, []byte, error) {
	t := data[0]
	if t&cmdCompressed == 0 {
		return cmdType(t), data[1:], nil
	}
	n, err := s2.DecodedLen(data[1:])
	if err != nil || n > maxCommandBytes {
		return 0, nil, fmt.Errorf("compressed command: length %d: %v", n, err)
	}
	b, err := s2.Decode(make([]byte, n), data[1:])
	return cmdType(t &^ cmdCompressed), b, err
}
