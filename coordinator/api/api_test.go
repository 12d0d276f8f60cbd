package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestSubmitValidationBound_GrowsWithTheSet: the bound of a submit is the
// configured base plus a second per 128 KiB of its set, never below what
// evalengine allows the same set's decode alone (up to the cap), and a
// configured bound above the cap holds.
func TestSubmitValidationBound_GrowsWithTheSet(t *testing.T) {
	for _, tc := range []struct {
		base time.Duration
		n    int
		want time.Duration
	}{
		{time.Second, 0, time.Second},
		{time.Second, 64 << 10, 1500 * time.Millisecond},
		// The set of the load failure (TestClusterEvalSubmitOverMaxPayloadIsUploaded):
		// 1.2 MiB got 2 s, where the engine alone allows itself 3 s.
		{time.Second, 1<<20 + 200<<10, time.Second + 9562500*time.Microsecond},
		{time.Second, 16 << 20, api.MaxSubmitValidation},
		{time.Minute, 64 << 10, time.Minute},
		{time.Minute, 16 << 20, time.Minute},
	} {
		got := api.SubmitValidationBound(tc.base, tc.n)
		if got != tc.want {
			t.Errorf("SubmitValidationBound(%v, %d) = %v, want %v", tc.base, tc.n, got, tc.want)
		}
		if engine := evalengine.DefaultValidationTimeout + time.Duration(max(0, tc.n-1<<20)/(128<<10))*time.Second; tc.n >= 1<<20 &&
			got < min(engine, max(tc.base, api.MaxSubmitValidation)) {
			t.Errorf("SubmitValidationBound(%v, %d) = %v, below the engine's %v for the same bytes", tc.base, tc.n, got, engine)
		}
	}
}

func encode(t testing.TB, kind string, v any) []byte {
	t.Helper()
	b, err := wire.Encode(kind, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeTasks(t *testing.T) {
	one := api.Task{JobID: "eval-1", Index: 3, Worker: "w0", DeadlineAt: 10}
	batch := func(n int, worker string) *api.TaskBatch {
		b := &api.TaskBatch{}
		for i := range n {
			b.Tasks = append(b.Tasks, api.Task{JobID: "eval-1", Index: i, Worker: worker})
		}
		return b
	}
	dup := batch(2, "w0")
	dup.Tasks[1].Index = 0
	for _, c := range []struct {
		name string
		data []byte
		n    int
		err  string
	}{
		{"one task", encode(t, api.KindTask, &one), 1, ""},
		{"batch", encode(t, api.KindTasks, batch(api.MaxBatchTasks, "w0")), api.MaxBatchTasks, ""},
		{"too many", encode(t, api.KindTasks, batch(api.MaxBatchTasks+1, "w0")), 0, "tasks"},
		{"empty batch", encode(t, api.KindTasks, batch(0, "w0")), 0, "0 tasks"},
		{"another worker's", encode(t, api.KindTasks, batch(2, "w1")), 0, "worker"},
		{"twice", encode(t, api.KindTasks, dup), 0, "twice"},
		{"other kind", encode(t, api.KindResult, &api.Result{JobID: "eval-1"}), 0, "kind"},
		{"garbage", []byte{0xc1, 0x00}, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts, err := api.DecodeTasks(c.data, "w0")
			if c.n > 0 {
				if err != nil || len(ts) != c.n {
					t.Fatalf("got %d tasks, %v", len(ts), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("got %d tasks, err %v; want an error with %q", len(ts), err, c.err)
			}
		})
	}
}

// FuzzDecodeTasks: whatever arrives on a worker's task subject either
// decodes into at most MaxBatchTasks distinct tasks for that worker or is
// refused; it never panics.
func FuzzDecodeTasks(f *testing.F) {
	f.Add(encode(f, api.KindTask, &api.Task{JobID: "eval-1", Index: 1, Worker: "w0"}))
	f.Add(encode(f, api.KindTasks, &api.TaskBatch{Tasks: []api.Task{{JobID: "j", Worker: "w0"}, {JobID: "j", Index: 1, Worker: "w0"}}}))
	f.Add([]byte{0x93, 0x01, 0xa4, 't', 'a', 's', 'k', 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := api.DecodeTasks(data, "w0")
		if err != nil {
			return
		}
		if len(ts) == 0 || len(ts) > api.MaxBatchTasks {
			t.Fatalf("%d tasks accepted", len(ts))
		}
		seen := map[api.TaskRef]bool{}
		for _, x := range ts {
			ref := api.TaskRef{JobID: x.JobID, Index: x.Index}
			if x.Worker != "w0" || seen[ref] {
				t.Fatalf("accepted %+v", x)
			}
			seen[ref] = true
		}
	})
}
