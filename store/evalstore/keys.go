package evalstore

import (
	"encoding/binary"
	"github.com/fadcedab/adk/store/evalrecord"
	"unicode/utf8"
)

// Key prefixes: one byte per record kind (coordinator/DESIGN.md). Scoped
// keys put a 16-bit big-endian length before every variable part, so a
// prefix seek never crosses into another scope and ids containing any
// byte (NUL included) order and page without collisions.
const (
	pMeta     = 'm' // m<name>                               counters, applied index, lease, cluster identity
	pUsage    = 'u' // u<scope16>                            bytes charged to a scope
	pSet      = 's' // s<scope16><id16><version>             SetRecord
	pSetRef   = 'f' // f<scope16><id16><version16><job>      key only: job refs a set revision
	pJob      = 'j' // j<scope16><job>                       Job
	pJobIndex = 'i' // i<job>                                scope (jobs are global ids)
	pResult   = 'o' // o<job>                                result JSON of a completed job
	pBaseline = 'b' // b<scope16><name>                      Baseline
	pActive   = 'a' // a<job>                                key only: running jobs
	pQueue    = 'q' // q<seq64><job>                         queued jobs in admission order
	pTask     = 'k' // k<job16><idx32>                       Task
	pAssigned = 'w' // w<worker16><job16><idx32>             key only: tasks in flight per worker
	pUpload   = 'x' // x<upload16>                           UploadRecord: a set upload in progress
	pPart     = 'y' // y<upload16><part32>                   one part's bytes
	pRequest  = 'r' // r<scope16><request id>                RequestRecord: a submit's idempotency key
	pReqAge   = 'e' // e<at64><scope16><request id>          key only: request records by age
	pTail     = 'g' // g<job16>[<chunk32>]                   a records job's result tail: node-local, not the log's (tails.go)
)

// MaxScopeBytes bounds an app scope (CONTRACTS §6: 1..256 bytes UTF-8).
const MaxScopeBytes = 256

// ValidScope checks an app scope.
func ValidScope(scope string) error {
	if scope == "" || len(scope) > MaxScopeBytes || !utf8.ValidString(scope) {
		return evalrecord.ErrInvalidScope
	}
	return nil
}

func appendPart(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func scoped(prefix byte, scope string) []byte {
	return appendPart([]byte{prefix}, scope)
}

func setSuffix(id, version string) []byte { return append(appendPart(nil, id), version...) }

func setKey(scope, id, version string) []byte {
	return append(scoped(pSet, scope), setSuffix(id, version)...)
}

func setRefPrefix(scope, id, version string) []byte {
	return appendPart(appendPart(scoped(pSetRef, scope), id), version)
}

func jobKey(scope, job string) []byte { return append(scoped(pJob, scope), job...) }
func jobIndexKey(job string) []byte   { return append([]byte{pJobIndex}, job...) }
func resultKey(job string) []byte     { return append([]byte{pResult}, job...) }
func activeKey(job string) []byte     { return append([]byte{pActive}, job...) }
func baselineKey(scope, name string) []byte {
	return append(scoped(pBaseline, scope), name...)
}
func usageKey(scope string) []byte { return scoped(pUsage, scope) }

func queueKey(seq uint64, job string) []byte {
	b := binary.BigEndian.AppendUint64([]byte{pQueue}, seq)
	return append(b, job...)
}

func taskPrefix(job string) []byte { return appendPart([]byte{pTask}, job) }
func taskKey(job string, idx int) []byte {
	return binary.BigEndian.AppendUint32(taskPrefix(job), uint32(idx))
}

func assignedPrefix(worker string) []byte { return appendPart([]byte{pAssigned}, worker) }
func assignedKey(worker, job string, idx int) []byte {
	return binary.BigEndian.AppendUint32(appendPart(assignedPrefix(worker), job), uint32(idx))
}

func uploadKey(id string) []byte  { return appendPart([]byte{pUpload}, id) }
func partPrefix(id string) []byte { return appendPart([]byte{pPart}, id) }
func partKey(id string, part int) []byte {
	return binary.BigEndian.AppendUint32(partPrefix(id), uint32(part))
}

func requestKey(scope, id string) []byte { return append(scoped(pRequest, scope), id...) }
func requestAgeKey(at int64, scope, id string) []byte {
	b := binary.BigEndian.AppendUint64([]byte{pReqAge}, uint64(at))
	return append(appendPart(b, scope), id...)
}

// splitPart reads one length-prefixed part.
func splitPart(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}
