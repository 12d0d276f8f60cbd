package iocount_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"go.uber.org/goleak"

	"github.com/fadcedab/adk/internal/iocount"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shortWriter takes at most room bytes, then fails.
type shortWriter struct{ room int }

var errFull = errors.New("full")

func (s *shortWriter) Write(p []byte) (int, error) {
	if len(p) > s.room {
		n := s.room
		s.room = 0
		return n, errFull
	}
	s.room -= len(p)
	return len(p), nil
}

// TestWriter_CountsWhatItsWriterTook: N is the bytes W took (a short
// write counts its part and returns W's error); without W, every byte
// written.
func TestWriter_CountsWhatItsWriterTook(t *testing.T) {
	var buf bytes.Buffer
	w := &iocount.Writer{W: &buf}
	if _, err := io.WriteString(w, "hello, "); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, "world"); err != nil {
		t.Fatal(err)
	}
	if w.N != 12 || buf.String() != "hello, world" {
		t.Errorf("N %d, wrote %q", w.N, buf.String())
	}

	short := &iocount.Writer{W: &shortWriter{room: 5}}
	if n, err := short.Write([]byte("0123456789")); n != 5 || !errors.Is(err, errFull) || short.N != 5 {
		t.Errorf("short write: %d, %v, N %d", n, err, short.N)
	}

	var discard iocount.Writer
	for range 3 {
		if n, err := discard.Write(make([]byte, 1000)); n != 1000 || err != nil {
			t.Fatalf("discard: %d, %v", n, err)
		}
	}
	if discard.N != 3000 {
		t.Errorf("discard counted %d, want 3000", discard.N)
	}
}
