package worker

import "github.com/fadcedab/adk/coordinator/api"

// maxSeenJobs bounds the jobs whose accepted tasks a worker remembers
// (oldest forgotten first); a job's set is one bit per task index up to
// the highest accepted, so a 100,000-task job costs at most 12.5 KiB.
const maxSeenJobs = 1024

// maxSeenIndex bounds a task index the set records (16 Mi tasks, 2 MiB of
// bits); a higher one is refused, not run.
const maxSeenIndex = 1 << 24

// taskSet remembers every task a worker process accepted, so a task
// message delivered twice (JetStream forgetting an ack in a server crash)
// never runs twice. Guarded by the worker's mu.
type taskSet struct {
	jobs  map[string][]uint64
	order []string // insertion order, for eviction
}

// add records ref and reports whether it was new.
func (s *taskSet) add(ref api.TaskRef) bool {
	if ref.Index < 0 || ref.Index >= maxSeenIndex {
		return false // no job has that many tasks: never run
	}
	if s.jobs == nil {
		s.jobs = map[string][]uint64{}
	}
	bits, ok := s.jobs[ref.JobID]
	if !ok {
		if len(s.order) >= maxSeenJobs {
			delete(s.jobs, s.order[0])
			s.order = s.order[1:]
		}
		s.order = append(s.order, ref.JobID)
	}
	word, bit := ref.Index/64, uint(ref.Index%64)
	for len(bits) <= word {
		bits = append(bits, 0)
	}
	if bits[word]&(1<<bit) != 0 {
		return false
	}
	bits[word] |= 1 << bit
	s.jobs[ref.JobID] = bits
	return true
}
