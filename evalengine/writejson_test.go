package evalengine_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// pieceWriter records the writes it is given.
type pieceWriter struct {
	buf      bytes.Buffer
	writes   int
	largest  int
	failFrom int // fail every write from this one on (0: never)
}

var errWriteFailed = errors.New("write failed")

func (w *pieceWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.failFrom > 0 && w.writes >= w.failFrom {
		return 0, errWriteFailed
	}
	w.largest = max(w.largest, len(p))
	return w.buf.Write(p)
}

// TestWriteJSON_IsRenderInPieces holds WriteJSON to Render's bytes and
// errors: a run's result (its samples encoded as they finished) is written
// in pieces no larger than 64 KiB, never as one document; a decoded result
// is rendered whole; a result over the bound writes nothing and fails as
// Render does; a failing writer's error comes back with no code.
func TestWriteJSON_IsRenderInPieces(t *testing.T) {
	set := streamSet(t, 300)
	o := opts(func(o *evalengine.Options) { o.Samples = 3; o.Concurrency = 4 })
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: evalengine.DefaultCriteria(), Options: o})
	if err != nil {
		t.Fatal(err)
	}
	want, err := evalengine.Render(r, evalengine.FormatJSON, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 4*64<<10 {
		t.Fatalf("the fixture's report is %d bytes; it must span several 64 KiB pieces", len(want))
	}
	var w pieceWriter
	if err := evalengine.WriteJSON(&w, r, evalengine.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.buf.Bytes(), want) {
		t.Fatal("WriteJSON's bytes differ from Render's")
	}
	if w.largest > 64<<10 || w.writes < len(want)/(64<<10) {
		t.Fatalf("%d writes, the largest %d bytes: want pieces of at most 64 KiB", w.writes, w.largest)
	}

	// Its memory: the pieces, not the document. Render's allocations
	// less WriteJSON's are at least half the document (its one buffer).
	alloc := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	whole := alloc(func() { _, err = evalengine.Render(r, evalengine.FormatJSON, evalengine.ExportOptions{}) })
	pieces := alloc(func() { err = evalengine.WriteJSON(discard{}, r, evalengine.ExportOptions{}) })
	if err != nil {
		t.Fatal(err)
	}
	if pieces+uint64(len(want))/2 > whole {
		t.Fatalf("WriteJSON allocated %d bytes, Render %d, for a %d-byte document", pieces, whole, len(want))
	}

	t.Run("a decoded result is rendered whole, to the same bytes", func(t *testing.T) {
		back, err := evalengine.DecodeResult(want)
		if err != nil {
			t.Fatal(err)
		}
		var w pieceWriter
		if err := evalengine.WriteJSON(&w, back, evalengine.ExportOptions{}); err != nil || !bytes.Equal(w.buf.Bytes(), want) {
			t.Fatalf("err %v, same bytes %v", err, bytes.Equal(w.buf.Bytes(), want))
		}
	})
	t.Run("over the bound: Render's error, nothing written", func(t *testing.T) {
		eo := evalengine.ExportOptions{MaxBytes: len(want) - 1}
		_, rerr := evalengine.Render(r, evalengine.FormatJSON, eo)
		var w pieceWriter
		err := evalengine.WriteJSON(&w, r, eo)
		if evalengine.ErrorCode(err) != evalengine.CodeExportByteLimitExceeded || err.Error() != rerr.Error() || w.writes != 0 {
			t.Fatalf("err %v (Render: %v), %d writes", err, rerr, w.writes)
		}
	})
	t.Run("bad options: Render's error, nothing written", func(t *testing.T) {
		var w pieceWriter
		err := evalengine.WriteJSON(&w, r, evalengine.ExportOptions{MaxBytes: -1})
		if evalengine.ErrorCode(err) == "" || w.writes != 0 {
			t.Fatalf("err %v, %d writes", err, w.writes)
		}
	})
	t.Run("a failing writer's error has no code", func(t *testing.T) {
		w := pieceWriter{failFrom: 2}
		err := evalengine.WriteJSON(&w, r, evalengine.ExportOptions{})
		if !errors.Is(err, errWriteFailed) || evalengine.ErrorCode(err) != "" {
			t.Fatalf("err %v", err)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
