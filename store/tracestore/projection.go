package tracestore

import (
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/jsonlimit"
	"github.com/fadcedab/adk/observability"
)

// Event kinds.
const (
	KindObservability     = "observability"
	KindWorkflowLifecycle = "workflow_lifecycle"
)

// Identity keys, in their canonical (sorted) order.
var identityKeys = observability.RecordIdentityKeys

// identity holds a record's identity values by identityKeys index; ""
// is absent (an identity value is never empty).
type identity [len(identityKeys)]string

const (
	idInvocation = iota
	idRun
	idTrace
	idWorkflow
)

func (id *identity) empty() bool { return *id == identity{} }

const (
	maxTextBytes  = 512
	maxListItems  = 16
	maxInputDepth = 16
)

// Closed projections (CONTRACTS §4).
var (
	v1Measurements = set("count", "duration_ms", "duration", "system_time", "monotonic_time", "bytes", "frames")
	v1MetaText     = set("run_id", "invocation_id", "session", "agent", "model", "tool", "call_id", "trace_id", "span_id", "parent_id", "tracestate")
	// Attribute keys: observability's one allowlist (the usage counters
	// as integers, every other key as text).
	usageInts, attrText = splitAllowlist()
	v2Text              = set("signal", "phase", "name", "kind", "trace_id", "span_id", "parent_span_id", "tracestate", "status")
	v2Ints              = set("schema_version", "trace_flags", "start_time_unix_nano", "end_time_unix_nano", "duration_nano")
	wfRequired          = set("type", "workflow_id", "workflow_kind", "invocation_id")
	wfOptText           = set("node_id", "node_type", "outcome", "pause_kind", "parent", "join_id", "from", "to", "fork_id")
	wfOptCounts         = set("iteration", "branch_count", "completed_count", "attempt")
)

// The projections' output objects: their keys, sorted as the stored JSON
// lists them.
var (
	envelopeFields    = fields(keys(nil, "schema_version", "content_captured", "event", "timestamp_ms", "measurements", "metadata"))
	measurementFields = fields(keys(v1Measurements))
	metadataFields    = fields(keys(v1MetaText, "trace_flags", "attributes")).classify(cText, v1MetaText)
	attributeFields   = fields(keys(attrText, keys(usageInts)...)).classify(cText, attrText).classify(cUsage, usageInts)
	spanFields        = fields(keys(v2Text, append(keys(v2Ints), "attributes")...)).classify(cText, v2Text).classify(cInt, v2Ints).classify(cObj, nil, "attributes")
	workflowFields    = fields(keys(wfRequired, append(append(keys(wfOptText), keys(wfOptCounts)...), "schema_version", "sequence", "timestamp")...)).
				classify(cText, wfOptText).classify(cInt, wfOptCounts)
	wfRequiredInOrder  = [...]string{"type", "workflow_id", "workflow_kind", "invocation_id"}
	spanIdentityFields = [...]string{"run_id", "workflow_id", "invocation_id"}
	spanIdentitySlots  = [...]int{idRun, idWorkflow, idInvocation}
)

// splitAllowlist splits observability.MetadataAttributes into the usage
// counters and the text keys (a text key may also hold a bool, an integer
// or a list of strings).
func splitAllowlist() (counts, text map[string]bool) {
	counts, text = map[string]bool{}, map[string]bool{}
	for k, r := range observability.MetadataAttributes {
		if r == observability.AttrRuleCount {
			counts[k] = true
		} else {
			text[k] = true
		}
	}
	return counts, text
}

func set(ks ...string) map[string]bool {
	m := make(map[string]bool, len(ks))
	for _, k := range ks {
		m[k] = true
	}
	return m
}

func keys(m map[string]bool, more ...string) []string {
	out := append([]string(nil), more...)
	for k := range m {
		out = append(out, k)
	}
	return out
}

// contentExact and contentStems recognise content under any casing or
// separator: a key is normalised to lowercase letters and digits, then
// matched exactly, by prefix or by suffix.
var (
	contentExact = set("content", "payload", "prompt", "prompts", "completion", "completions", "input", "inputs",
		"output", "outputs", "arguments", "args", "response", "responses", "request", "requests", "message",
		"messages", "text", "media", "body", "result", "results", "instructions", "query", "contents", "parts")
	contentPrefixes = []string{"prompt", "completion", "payload", "content", "arguments", "requestbody",
		"responsebody", "message", "toolresult", "toolargs", "inputtext", "outputtext", "media"}
	contentSuffixes = []string{"body", "text", "content", "payload", "prompt", "arguments", "completion", "messages"}
)

// isContentKey reports whether a key (outside the projection's own keys)
// names content.
func isContentKey[T string | []byte](k T) bool {
	var buf [64]byte
	n, ok := normalizeASCIIKey(buf[:0], k)
	if !ok { // non-ASCII (Unicode case folding) or long: the general path
		var b strings.Builder
		b.Grow(len(k))
		for _, r := range strings.ToLower(string(k)) {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				b.WriteRune(r)
			}
		}
		n = []byte(b.String())
	}
	if contentExact[string(n)] {
		return true
	}
	for _, p := range contentPrefixes {
		if len(n) >= len(p) && string(n[:len(p)]) == p {
			return true
		}
	}
	for _, s := range contentSuffixes {
		if len(n) >= len(s) && string(n[len(n)-len(s):]) == s {
			return true
		}
	}
	return false
}

// normalizeASCIIKey is isContentKey's allocation-free path: an ASCII key
// lowercased with everything but letters and digits removed. ok is false
// when the key is not ASCII (strings.ToLower may map it to ASCII letters,
// as with the Kelvin sign) or does not fit b.
func normalizeASCIIKey[T string | []byte](b []byte, k T) ([]byte, bool) {
	if len(k) > cap(b) {
		return nil, false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= utf8.RuneSelf:
			return nil, false
		case c >= 'A' && c <= 'Z':
			b = append(b, c+'a'-'A')
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b = append(b, c)
		}
	}
	return b, true
}

// fieldSet is the closed key set of one output object, sorted.
type fieldSet struct {
	names  []string
	quoted []string // `"name":`
	index  map[string]int
	class  []byte // what the projection does with each key (c* below)
	// table finds a key's index without hashing all of it (a map lookup
	// per key and record was a tenth of Prepare): open addressing on
	// fieldHash, -1 empty; a hit is confirmed by comparing the name.
	table [fieldTableSize]int8
}

// fieldTableSize is a power of two well above the largest set (~30 keys).
const fieldTableSize = 128

// fieldHash mixes a key's length and three of its bytes.
func fieldHash[T string | []byte](k T) uint32 {
	n := len(k)
	if n == 0 {
		return 0
	}
	h := uint32(n)*0x9e3779b1 ^ uint32(k[n-1])*0x85ebca6b ^ uint32(k[n/2])*0xc2b2ae35 ^ uint32(k[n/3])*0x27d4eb2f
	return h ^ h>>15
}

// fieldIndex returns the index of key k in fs, or -1.
func fieldIndex[T string | []byte](fs *fieldSet, k T) int {
	for h := fieldHash(k); ; h++ {
		i := fs.table[h&(fieldTableSize-1)]
		if i < 0 || fs.names[i] == string(k) {
			return int(i)
		}
	}
}

// Key classes: how a projection treats a key of its set.
const (
	cOther byte = iota
	cText       // a string (≤512 B)
	cInt        // a non-negative integer
	cUsage      // attributes: a usage count (non-negative integer)
	cObj        // a nested object
)

// find returns the index of key k in the set, or -1.
func (fs *fieldSet) find(k []byte) int { return fieldIndex(fs, k) }

// classify sets the class of the set's keys that are in m.
func (fs *fieldSet) classify(c byte, m map[string]bool, more ...string) *fieldSet {
	for k := range m {
		fs.class[fs.index[k]] = c
	}
	for _, k := range more {
		fs.class[fs.index[k]] = c
	}
	return fs
}

func fields(names []string) *fieldSet {
	sort.Strings(names)
	if len(names) > fieldTableSize/2 {
		panic("tracestore: field set too large for its table")
	}
	fs := &fieldSet{names: names, index: make(map[string]int, len(names)), class: make([]byte, len(names))}
	for i := range fs.table {
		fs.table[i] = -1
	}
	for i, n := range names {
		fs.quoted = append(fs.quoted, string(appendJSONString(nil, n))+":")
		fs.index[n] = i
		h := fieldHash(n)
		for fs.table[h&(fieldTableSize-1)] >= 0 {
			h++
		}
		fs.table[h&(fieldTableSize-1)] = int8(i)
	}
	return fs
}

// Slot kinds.
const (
	sNone byte = iota
	sStr
	sInt
	sRaw // a JSON number kept as written
	sBool
	sList
	sObj
)

type slot struct {
	kind byte
	b    []byte // sStr: decoded (valid UTF-8); sRaw: the number's text
	n    int64
	t    bool
	list [][]byte
	obj  *object
}

// object is one closed projection object: a value slot per key of its set.
type object struct {
	fs    *fieldSet
	slots []slot
	count int
}

// newObject takes the object and its slots from the projector's slabs,
// which reset() reuses for the next record of a batch.
func (p *projector) newObject(fs *fieldSet) *object {
	n := len(fs.names)
	if cap(p.slots)-len(p.slots) < n {
		p.slots = make([]slot, 0, max(512, n)) // earlier objects keep the old slab
	}
	p.slots = p.slots[:len(p.slots)+n]
	sl := p.slots[len(p.slots)-n:]
	clear(sl)
	if len(p.objs) == cap(p.objs) {
		p.objs = make([]object, 0, 64)
	}
	p.objs = append(p.objs, object{fs: fs, slots: sl})
	return &p.objs[len(p.objs)-1]
}

func (o *object) put(name string, s slot) {
	i := fieldIndex(o.fs, name)
	if o.slots[i].kind == sNone {
		o.count++
	}
	o.slots[i] = s
}

func (o *object) get(name string) *slot { return &o.slots[fieldIndex(o.fs, name)] }

func (o *object) putAt(i int, s slot) {
	if o.slots[i].kind == sNone {
		o.count++
	}
	o.slots[i] = s
}

// appendJSON encodes the object with sorted keys: deterministic, and what
// encoding/json gives for the same map (projection_ref_test.go checks).
func (o *object) appendJSON(b []byte) []byte {
	b = append(b, '{')
	first := true
	for i := range o.slots {
		s := &o.slots[i]
		if s.kind == sNone {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, o.fs.quoted[i]...)
		switch s.kind {
		case sStr:
			b = appendJSONString(b, s.b)
		case sInt:
			b = appendInt(b, s.n)
		case sRaw:
			b = append(b, s.b...)
		case sBool:
			if s.t {
				b = append(b, "true"...)
			} else {
				b = append(b, "false"...)
			}
		case sList:
			b = append(b, '[')
			for j, e := range s.list {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, e)
			}
			b = append(b, ']')
		case sObj:
			b = s.obj.appendJSON(b)
		}
	}
	return append(b, '}')
}

// evalKeys are the eval selector keys in their selector order (job, then
// case, then sample: each narrows the one before), and evalAttrs the span
// attributes that carry them.
var (
	evalKeys  = [...]string{"job_id", "case_id", "sample_id"}
	evalAttrs = [...]string{observability.AttrEvalJobID, observability.AttrEvalCaseID, observability.AttrEvalSampleID}
)

// evalIdentity holds a record's eval ids by evalKeys index; "" is absent.
type evalIdentity [len(evalKeys)]string

// projected is the result of projecting one input event.
type projected struct {
	event    *object
	identity identity
	eval     evalIdentity
	tsMS     int64
	pruned   bool
}

// projector applies one content policy to one scanned document. A
// projector is reused record after record (Prepare): what one projection
// returns is valid until the next.
type projector struct {
	sc    *scanner
	prune bool
	// dropped records that the projection left something out.
	dropped bool
	slots   []slot
	objs    []object
	// out and path are reused record after record (no allocation each).
	out  projected
	path [maxInputDepth + 1][]byte
}

func (p *projector) result(ev *object, id identity, tsMS int64) *projected {
	p.out = projected{event: ev, identity: id, tsMS: tsMS}
	return &p.out
}

// evalOf reads the eval ids of a projected attributes object (nil: none).
// A case without its job, or a sample without its case, is not indexed
// below the level it lacks: the selectors nest.
func evalOf(attrs *object) (e evalIdentity) {
	if attrs == nil {
		return e
	}
	for i, k := range evalAttrs {
		s := attrs.get(k)
		if s.kind != sStr || len(s.b) == 0 || i > 0 && e[i-1] == "" {
			break
		}
		e[i] = string(s.b)
	}
	return e
}

var projectors = sync.Pool{New: func() any { return &projector{sc: new(scanner)} }}

func (p *projector) reset(prune bool) {
	p.prune, p.dropped = prune, false
	p.slots, p.objs = p.slots[:0], p.objs[:0]
}

// outside handles a field outside the projection: an error under reject,
// a note under prune.
func (p *projector) outside() error {
	if !p.prune {
		return errCode(CodeContentRejected, "field outside the metadata projection")
	}
	p.dropped = true
	return nil
}

// decodeLimits are jsonlimit's defaults with depth 16 and the size bound.
func decodeLimits(o Options) jsonlimit.Limits {
	return jsonlimit.Limits{MaxDepth: maxInputDepth, MaxNodes: jsonlimit.DefaultMaxNodes, MaxString: jsonlimit.DefaultMaxString,
		MaxStringTotal: jsonlimit.DefaultMaxStringTotal, MaxList: jsonlimit.DefaultMaxList, MaxObjectKeys: jsonlimit.DefaultMaxObjectKeys,
		MaxBytes: min(4*o.MaxEventBytes, jsonlimit.DefaultMaxBytes)}
}

// project validates (bounded, as jsonlimit.Decode) and projects one record
// straight from its bytes into the closed projection.
//
// Errors, first match wins: the decode bounds (input too large) or invalid
// JSON; not an object or a bad kind or schema_version; content anywhere
// (reject); then, per kind, the field checks in the order of the
// reference implementation's phases (projection_ref_test.go), with fields
// of one phase checked in document order.
func project(kind string, data []byte, o Options) (*projected, error) {
	return (&projector{sc: new(scanner)}).project(kind, data, o)
}

// project is project with this projector's scanner and slabs; the result
// is valid until the projector's next use.
func (p *projector) project(kind string, data []byte, o Options) (*projected, error) {
	p.reset(o.ContentPolicy == ContentPrune)
	sc := p.sc
	if err := sc.scan(data, decodeLimits(o)); err != nil {
		if err.bound {
			return nil, errCode(CodeInputTooLarge, "input exceeds decode bounds")
		}
		return nil, errCode(invalidCode(kind), "not valid JSON")
	}
	if sc.tape[0].kind != tObj {
		return nil, errCode(invalidCode(kind), "not an object")
	}
	var out *projected
	var err error
	switch kind {
	case KindWorkflowLifecycle:
		out, err = p.workflow()
	case KindObservability:
		switch p.intOf(p.lookup(0, "schema_version")) {
		case 1:
			out, err = p.envelope()
		case 2:
			out, err = p.span()
		default:
			err = errCode(CodeInvalidObservability, "schema_version")
		}
	default:
		err = errCode(CodeInvalidObservability, "unknown record kind")
	}
	if err != nil {
		return nil, err
	}
	out.pruned = p.dropped
	if out.identity.empty() {
		return nil, errCode(CodeIdentityRequired, "no run_id, trace_id, workflow_id or invocation_id")
	}
	return out, nil
}

func invalidCode(kind string) string {
	if kind == KindWorkflowLifecycle {
		return CodeInvalidLifecycle
	}
	return CodeInvalidObservability
}

// pairs calls fn for each key and value token of the object at obj, in
// document order, until fn returns false.
func (p *projector) pairs(obj int, fn func(k []byte, v int) bool) {
	t := p.sc.tape
	i := obj + 1
	for j := int32(0); j < t[obj].n; j++ {
		v := i + 1
		if !fn(p.sc.bytesOf(&t[i]), v) {
			return
		}
		i = int(t[v].next)
	}
}

// lookup returns the value token of key name in the object at obj, or -1.
func (p *projector) lookup(obj int, name string) int {
	at := -1
	p.pairs(obj, func(k []byte, v int) bool {
		if string(k) == name {
			at = v
			return false
		}
		return true
	})
	return at
}

func (p *projector) kind(v int) byte {
	if v < 0 {
		return 0
	}
	return p.sc.tape[v].kind
}

// text is a string of at most 512 bytes (the scanner checked UTF-8).
func (p *projector) text(v int) ([]byte, bool) {
	if p.kind(v) != tStr {
		return nil, false
	}
	s := p.sc.bytesOf(&p.sc.tape[v])
	return s, len(s) <= maxTextBytes
}

func (p *projector) number(v int) (int64, bool) {
	if p.kind(v) != tNum {
		return 0, false
	}
	t := &p.sc.tape[v]
	return parseInt64(p.sc.data[t.start:t.end])
}

func (p *projector) nonNegInt(v int) (int64, bool) {
	n, ok := p.number(v)
	return n, ok && n >= 0
}

func (p *projector) intOf(v int) int64 {
	n, _ := p.nonNegInt(v)
	return n
}

// contentCheck rejects (or notes) content anywhere in the document, given
// which keys at which path (object keys only; arrays add nothing) belong
// to the projection.
func (p *projector) contentCheck(allowed func(path [][]byte, k []byte) bool) error {
	if p.containsContent(0, allowed, p.path[:0]) {
		if !p.prune {
			return errCode(CodeContentRejected, "content field")
		}
		p.dropped = true
	}
	return nil
}

func (p *projector) containsContent(at int, allowed func(path [][]byte, k []byte) bool, path [][]byte) bool {
	t := p.sc.tape
	switch t[at].kind {
	case tObj:
		found := false
		p.pairs(at, func(k []byte, v int) bool {
			found = !allowed(path, k) && isContentKey(k) || p.containsContent(v, allowed, append(path, k))
			return !found
		})
		return found
	case tArr:
		i := at + 1
		for j := int32(0); j < t[at].n; j++ {
			if p.containsContent(i, allowed, path) {
				return true
			}
			i = int(t[i].next)
		}
	}
	return false
}

func (p *projector) envelope() (*projected, error) {
	allowed := func(path [][]byte, k []byte) bool {
		switch len(path) {
		case 0:
			return envelopeFields.has(k)
		case 1:
			return string(path[0]) == "metadata" && metadataFields.has(k) ||
				string(path[0]) == "measurements" && v1Measurements[string(k)]
		case 2:
			return string(path[1]) == "attributes" && attributeFields.has(k)
		}
		return false
	}
	if err := p.contentCheck(allowed); err != nil {
		return nil, err
	}
	ev := p.newObject(envelopeFields)
	ev.put("schema_version", slot{kind: sInt, n: 1})
	ev.put("content_captured", slot{kind: sBool})
	meta := -1
	var err error
	p.pairs(0, func(k []byte, v int) bool {
		switch string(k) {
		case "schema_version":
		case "event":
			s, ok := p.text(v)
			if !ok || len(s) == 0 || len(s) > 256 {
				err = errCode(CodeInvalidObservability, "event")
				return false
			}
			ev.put("event", slot{kind: sStr, b: s})
		case "timestamp_ms":
			n, ok := p.nonNegInt(v)
			if !ok {
				err = errCode(CodeInvalidObservability, "timestamp_ms")
				return false
			}
			ev.put("timestamp_ms", slot{kind: sInt, n: n})
		case "content_captured":
			if p.kind(v) != tFalse {
				err = p.outside()
			}
		case "measurements":
			if p.kind(v) != tObj {
				err = errCode(CodeInvalidObservability, "measurements")
				return false
			}
			mm := p.newObject(measurementFields)
			p.pairs(v, func(mk []byte, mv int) bool {
				if p.kind(mv) == tNum && v1Measurements[string(mk)] {
					t := &p.sc.tape[mv]
					mm.put(string(mk), slot{kind: sRaw, b: p.sc.data[t.start:t.end]})
				}
				return true
			})
			ev.put("measurements", slot{kind: sObj, obj: mm})
		case "metadata":
			meta = v
		default:
			err = p.outside()
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if ev.get("event").kind == sNone {
		return nil, errCode(CodeInvalidObservability, "event")
	}
	ts := ev.get("timestamp_ms").n
	om := p.newObject(metadataFields)
	var id identity
	if p.kind(meta) == tObj {
		p.pairs(meta, func(k []byte, v int) bool {
			switch {
			case v1MetaText[string(k)]:
				s, ok := p.text(v)
				if !ok {
					err = errCode(CodeInvalidObservability, "metadata."+string(k))
					return false
				}
				if len(s) > 0 {
					om.put(string(k), slot{kind: sStr, b: s})
					switch string(k) {
					case "run_id":
						id[idRun] = string(s)
					case "trace_id":
						id[idTrace] = string(s)
					case "invocation_id":
						id[idInvocation] = string(s)
					}
				}
			case string(k) == "trace_flags":
				n, ok := p.nonNegInt(v)
				if !ok || n > 255 {
					err = errCode(CodeInvalidObservability, "trace_flags")
					return false
				}
				om.put("trace_flags", slot{kind: sInt, n: n})
			case string(k) == "attributes":
				switch p.kind(v) {
				case tNull:
				case tObj:
					if fa := p.filterAttributes(v); fa.count > 0 {
						om.put("attributes", slot{kind: sObj, obj: fa})
					}
				default:
					err = errCode(CodeInvalidObservability, "attributes")
					return false
				}
			default:
				err = p.outside()
			}
			return err == nil
		})
		if err != nil {
			return nil, err
		}
	}
	ev.put("metadata", slot{kind: sObj, obj: om})
	out := p.result(ev, id, ts)
	if a := om.get("attributes"); a.kind == sObj {
		out.eval = evalOf(a.obj)
	}
	return out, nil
}

func (p *projector) span() (*projected, error) {
	allowed := func(path [][]byte, k []byte) bool {
		switch len(path) {
		case 0:
			return spanFields.has(k)
		case 1:
			return string(path[0]) == "attributes" && attributeFields.has(k)
		}
		return false
	}
	if err := p.contentCheck(allowed); err != nil {
		return nil, err
	}
	ev := p.newObject(spanFields)
	var err error
	p.pairs(0, func(k []byte, v int) bool {
		i := spanFields.find(k)
		switch {
		case i >= 0 && spanFields.class[i] == cText:
			s, ok := p.text(v)
			if !ok {
				err = errCode(CodeInvalidObservability, string(k))
				return false
			}
			if len(s) > 0 {
				ev.putAt(i, slot{kind: sStr, b: s})
			}
		case i >= 0 && spanFields.class[i] == cInt:
			n, ok := p.nonNegInt(v)
			if !ok {
				err = errCode(CodeInvalidObservability, string(k))
				return false
			}
			ev.putAt(i, slot{kind: sInt, n: n})
		case i >= 0 && spanFields.class[i] == cObj: // attributes
			switch p.kind(v) {
			case tNull:
				ev.putAt(i, slot{kind: sObj, obj: p.newObject(attributeFields)})
			case tObj:
				ev.putAt(i, slot{kind: sObj, obj: p.filterAttributes(v)})
			default:
				err = errCode(CodeInvalidObservability, "attributes")
				return false
			}
		default:
			err = p.outside()
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if sig := ev.get("signal"); sig.kind != sStr || string(sig.b) != "span" || ev.get("name").kind == sNone || ev.get("phase").kind == sNone {
		return nil, errCode(CodeInvalidObservability, "span shape")
	}
	tid := ev.get("trace_id")
	if tid.kind == sNone {
		return nil, errCode(CodeInvalidObservability, "trace_id")
	}
	id := identity{idTrace: string(tid.b)}
	var attrs *object
	if a := ev.get("attributes"); a.kind == sObj {
		attrs = a.obj
		for i, k := range spanIdentityFields {
			if s := a.obj.get(k); s.kind == sStr && len(s.b) > 0 {
				id[spanIdentitySlots[i]] = string(s.b)
			}
		}
	}
	out := p.result(ev, id, ev.get("start_time_unix_nano").n/1_000_000)
	out.eval = evalOf(attrs)
	return out, nil
}

func (p *projector) workflow() (*projected, error) {
	allowed := func(path [][]byte, k []byte) bool {
		return len(path) == 0 && workflowFields.has(k)
	}
	if err := p.contentCheck(allowed); err != nil {
		return nil, err
	}
	bad := func(f string) (*projected, error) { return nil, errCode(CodeInvalidLifecycle, f) }
	if p.intOf(p.lookup(0, "schema_version")) != 1 {
		return bad("schema_version")
	}
	ev := p.newObject(workflowFields)
	ev.put("schema_version", slot{kind: sInt, n: 1})
	for _, k := range wfRequiredInOrder {
		s, ok := p.text(p.lookup(0, k))
		if !ok || len(s) == 0 || k == "type" && len(s) > 128 {
			return bad(k)
		}
		ev.put(k, slot{kind: sStr, b: s})
	}
	seq, ok := p.nonNegInt(p.lookup(0, "sequence"))
	if !ok || seq <= 0 {
		return bad("sequence")
	}
	ts, ok := p.nonNegInt(p.lookup(0, "timestamp"))
	if !ok {
		return bad("timestamp")
	}
	ev.put("sequence", slot{kind: sInt, n: seq})
	ev.put("timestamp", slot{kind: sInt, n: ts})
	var err error
	p.pairs(0, func(k []byte, v int) bool {
		ks := string(k)
		switch {
		case wfRequired[ks] || ks == "schema_version" || ks == "sequence" || ks == "timestamp":
		case wfOptText[ks]:
			s, ok := p.text(v)
			if !ok {
				err = errCode(CodeInvalidLifecycle, ks)
				return false
			}
			ev.put(ks, slot{kind: sStr, b: s})
		case wfOptCounts[ks]:
			n, ok := p.nonNegInt(v)
			if !ok {
				err = errCode(CodeInvalidLifecycle, ks)
				return false
			}
			ev.put(ks, slot{kind: sInt, n: n})
		default:
			err = p.outside()
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	id := identity{idWorkflow: string(ev.get("workflow_id").b), idInvocation: string(ev.get("invocation_id").b)}
	return p.result(ev, id, ts), nil
}

// filterAttributes keeps the allowlisted attributes of the object at obj
// with allowed values: usage counts as non-negative integers; text keys as
// strings (≤512 B), booleans, integers or lists of at most 16 such strings.
// Anything else is dropped silently.
func (p *projector) filterAttributes(obj int) *object {
	out := p.newObject(attributeFields)
	t := p.sc.tape
	p.pairs(obj, func(k []byte, v int) bool {
		a := attributeFields.find(k)
		if a < 0 {
			return true
		}
		switch attributeFields.class[a] {
		case cUsage:
			if n, ok := p.nonNegInt(v); ok {
				out.putAt(a, slot{kind: sInt, n: n})
			}
		case cText:
			switch t[v].kind {
			case tStr:
				if s := p.sc.bytesOf(&t[v]); len(s) <= maxTextBytes {
					out.putAt(a, slot{kind: sStr, b: s})
				}
			case tTrue, tFalse:
				out.putAt(a, slot{kind: sBool, t: t[v].kind == tTrue})
			case tNum:
				if n, ok := p.number(v); ok {
					out.putAt(a, slot{kind: sInt, n: n})
				}
			case tArr:
				if t[v].n > maxListItems {
					break
				}
				l := make([][]byte, 0, t[v].n)
				for i, j := v+1, int32(0); j < t[v].n; i, j = int(t[i].next), j+1 {
					if t[i].kind != tStr {
						return true
					}
					s := p.sc.bytesOf(&t[i])
					if len(s) > maxTextBytes {
						return true
					}
					l = append(l, s)
				}
				out.putAt(a, slot{kind: sList, list: l})
			}
		}
		return true
	})
	return out
}

func (fs *fieldSet) has(k []byte) bool { return fieldIndex(fs, k) >= 0 }
