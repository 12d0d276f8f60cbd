package jsonlimit

import (
	"encoding/json"
	"fmt"
	"testing"
)

// realisticDoc returns a ~100 KiB eval set: cases with turns, a tool
// trajectory with argument maps, numbers, and unicode and escaped text.
func realisticDoc(tb testing.TB) []byte {
	type call struct {
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	}
	type evalCase struct {
		ID         string         `json:"id"`
		Input      string         `json:"input"`
		Expected   string         `json:"expected_response"`
		Trajectory []call         `json:"expected_trajectory"`
		Metadata   map[string]any `json:"metadata"`
	}
	var cases []evalCase
	for i := range 220 {
		cases = append(cases, evalCase{
			ID:       fmt.Sprintf("case-%04d", i),
			Input:    fmt.Sprintf("Book a table for %d people at \"Chez Zoë\" on 2026-08-%02d.\nThey need a quiet corner — no smoking.", i%8+1, i%28+1),
			Expected: "Your table is booked. Confirmation: ☕ " + fmt.Sprint(1000+i),
			Trajectory: []call{
				{Name: "search_restaurants", Args: map[string]any{"query": "Chez Zoë", "limit": 5, "open_now": true}},
				{Name: "book_table", Args: map[string]any{"restaurant_id": i * 37, "party_size": i%8 + 1, "price": 12.5 + float64(i)/10}},
			},
			Metadata: map[string]any{"tags": []string{"booking", "regression"}, "weight": 0.25, "owner": nil},
		})
	}
	b, err := json.Marshal(map[string]any{"schema_version": 2, "id": "bookings", "name": "Booking agent", "cases": cases})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func BenchmarkDecode(b *testing.B) {
	doc := realisticDoc(b)
	b.Run("jsonlimit", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(doc, Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jsonlimit_check", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if err := Check(doc, Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			var v any
			if err := json.Unmarshal(doc, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestRealisticDoc(t *testing.T) {
	doc := realisticDoc(t)
	if n := len(doc); n < 90<<10 || n > 120<<10 {
		t.Fatalf("benchmark document is %d bytes, want ~100 KiB", n)
	}
	if _, err := Decode(doc, Limits{}); err != nil {
		t.Fatal(err)
	}
}
