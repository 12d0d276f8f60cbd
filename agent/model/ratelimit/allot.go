package ratelimit

import "math"

// UnknownDemand is the demand of a holder that does not report one (a
// worker of an earlier build): it wants an equal share, as before demand
// was reported.
const UnknownDemand = -1

// Allot is holder self's grant of total among holders whose demands are
// given (in a stable order, the same for every holder; a demand is the
// most callers, in flight and waiting, the holder had at once lately: 0
// is idle, UnknownDemand unbounded). turn rotates which holders get the
// concurrency slots that do not divide evenly.
//
// Grants follow demand. Idle holders get nothing while any holder has
// demand (if none has, all share equally, so the first call of a job
// need not wait for a grant). The concurrency slots are filled max-min
// fairly up to each holder's demand (no holder gets more slots than
// callers while another waits), and the slots left over go round among
// the demanding holders. The per-minute limits are split equally among
// the demanding holders that get a slot: a holder without one cannot
// call, so its equal share of the rate would go unused.
//
// As Share, no grant exceeds what the others do not hold (othersHeld), so
// the grants outstanding never add up past total while shares move.
func Allot(total Limits, demands []int, self, turn int, othersHeld Limits) Limits {
	if self < 0 || self >= len(demands) {
		return Limits{}
	}
	active := make([]int, 0, len(demands))
	for i, d := range demands {
		if d != 0 {
			active = append(active, i)
		}
	}
	capped := true
	if len(active) == 0 {
		for i := range demands {
			active = append(active, i)
		}
		capped = false
	}
	none := Limits{RPM: zeroUnlessUnlimited(total.RPM), TPM: zeroUnlessUnlimited(total.TPM), Concurrent: total.Concurrent}
	if total.Concurrent != UnlimitedConcurrent {
		none.Concurrent = 0
	}
	pos := -1
	for k, i := range active {
		if i == self {
			pos = k
		}
	}
	if pos < 0 {
		return none // idle while others wait
	}
	callers := len(active)
	out := Limits{Concurrent: UnlimitedConcurrent}
	if total.Concurrent != UnlimitedConcurrent {
		caps := make([]int, len(active))
		for k, i := range active {
			caps[k] = math.MaxInt32
			if capped && demands[i] > 0 {
				caps[k] = demands[i]
			}
		}
		slots := fill(total.Concurrent, caps, turn)
		if slots[pos] == 0 {
			return none // no slot this turn: no rate either
		}
		callers = 0
		for _, s := range slots {
			if s > 0 {
				callers++
			}
		}
		out.Concurrent = max(0, min(slots[pos], total.Concurrent-othersHeld.Concurrent))
	}
	share := func(t, held float64) float64 {
		if math.IsInf(t, 1) {
			return t
		}
		return max(0, min(t/float64(callers), t-held))
	}
	out.RPM, out.TPM = share(total.RPM, othersHeld.RPM), share(total.TPM, othersHeld.TPM)
	return out
}

func zeroUnlessUnlimited(v float64) float64 {
	if math.IsInf(v, 1) {
		return v
	}
	return 0
}

// fill splits n slots max-min fairly among holders capped at caps: a
// holder wanting less than an equal part gets what it wants and the rest
// is split among the others; the remainder of an uneven split, and the
// slots nobody wants (every cap met), go one each round the holders
// starting at turn (mod len(caps)).
func fill(n int, caps []int, turn int) []int {
	got := make([]int, len(caps))
	if len(caps) == 0 {
		return got
	}
	start := ((turn % len(caps)) + len(caps)) % len(caps)
	open := make([]bool, len(caps))
	left := len(caps)
	for i := range open {
		open[i] = true
	}
	for left > 0 && n > 0 {
		q := n / left
		met := false
		for i, c := range caps {
			if open[i] && c <= q {
				got[i], n, open[i], met = c, n-c, false, true
				left--
			}
		}
		if met {
			continue
		}
		for i := range caps {
			if open[i] {
				got[i] += q
				n -= q
			}
		}
		break
	}
	// The remainder: one each from turn on, to the holders still wanting
	// more first, then (every cap met) to anyone.
	for _, wanting := range []bool{true, false} {
		for k := 0; k < len(caps) && n > 0; k++ {
			i := (start + k) % len(caps)
			if !wanting || got[i] < caps[i] {
				got[i]++
				n--
			}
		}
	}
	for n > 0 { // more spare slots than holders
		for k := 0; k < len(caps) && n > 0; k++ {
			got[(start+k)%len(caps)]++
			n--
		}
	}
	return got
}
