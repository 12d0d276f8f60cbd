package evalstore

import (
	"bytes"
	"github.com/fadcedab/adk/store/evalrecord"
	"testing"
)

// encodeSized writes encode's bytes, whatever its hint.
func TestEncodeSizedIsEncode(t *testing.T) {
	tk := &evalrecord.Task{JobID: "eval-a", Index: 7, Worker: "w1", State: evalrecord.TaskDone, AssignedAt: 1, DeadlineAt: 2, FinishedAt: 3,
		Sample: bytes.Repeat([]byte("x"), 3000)}
	want, err := encode(tk)
	if err != nil {
		t.Fatal(err)
	}
	for _, hint := range []int{0, 1, len(want), 10 << 10} {
		got, err := encodeSized(tk, hint)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("hint %d: %v, equal %v", hint, err, bytes.Equal(got, want))
		}
	}
}
