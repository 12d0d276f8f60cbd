package bus

// queueChunk is the item count of one chunk of a signalQueue: 24 KiB, a
// small-object size class.
const queueChunk = 512

// signalQueue is the publisher's FIFO of signals not yet in a batch: a list
// of fixed-size chunks, so a queue of hundreds of thousands of signals is
// never reallocated or copied as it grows and drains (one slice was: every
// growth copied the whole queue into fresh, page-faulting memory).
type signalQueue struct {
	chunks [][]pubItem // all full but the last; the first starts at head
	head   int
	n      int
	spare  []pubItem // one emptied chunk kept for reuse
}

func (q *signalQueue) len() int { return q.n }

func (q *signalQueue) push(it pubItem) {
	if len(q.chunks) == 0 || len(q.chunks[len(q.chunks)-1]) == queueChunk {
		c := q.spare
		q.spare = nil
		if c == nil {
			c = make([]pubItem, 0, queueChunk)
		}
		q.chunks = append(q.chunks, c)
	}
	last := len(q.chunks) - 1
	q.chunks[last] = append(q.chunks[last], it)
	q.n++
}

// at returns the i-th item from the front (i < len).
func (q *signalQueue) at(i int) *pubItem {
	j := q.head + i
	return &q.chunks[j/queueChunk][j%queueChunk]
}

// popInto moves the first len(dst) items into dst.
func (q *signalQueue) popInto(dst []pubItem) {
	for k := range dst {
		c := q.chunks[0]
		dst[k] = c[q.head]
		c[q.head] = pubItem{}
		q.head++
		q.n--
		if q.head == queueChunk || q.n == 0 {
			q.chunks[0] = nil
			q.chunks = q.chunks[1:]
			q.spare = c[:0]
			q.head = 0
		}
	}
	if q.n == 0 {
		q.chunks = q.chunks[:0]
	}
}

// reset empties the queue, releasing the items' records.
func (q *signalQueue) reset() {
	for i := range q.n {
		q.at(i).Release()
	}
	*q = signalQueue{}
}
