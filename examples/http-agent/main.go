// Command http-agent is the smallest agent the evalengine HTTP adapter can
// evaluate: it answers POST / with {output, events, metadata} for the turn
// it is given, following the protocol in evalengine/httpadapter. Write the
// same thing in any language.
//
//	go run ./examples/http-agent -addr 127.0.0.1:8089
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/http"
	"strings"
	"time"
)

// turnRequest is what the adapter posts for every turn.
type turnRequest struct {
	CaseID    string `json:"case_id"`
	SampleID  string `json:"sample_id"`
	TurnID    string `json:"turn_id"`
	TurnIndex int    `json:"turn_index"`
	Input     any    `json:"input"`
	SessionID string `json:"session_id"`
}

// turnResponse is the answer: output is required, events and metadata are
// optional. Tool calls are reported as events.
type turnResponse struct {
	Output   any            `json:"output"`
	Events   []any          `json:"events,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

func toolCall(name string, args map[string]any) any {
	return map[string]any{"author": "agent", "content": map[string]any{
		"type": "tool_calls", "calls": []any{map[string]any{"name": name, "args": args, "call_id": "call-1"}},
	}}
}

func answer(req turnRequest) turnResponse {
	text, _ := req.Input.(string)
	switch {
	case strings.Contains(text, "weather in Pune"):
		return turnResponse{
			Output: "It is sunny in Pune, 31°C.",
			Events: []any{toolCall("get_weather", map[string]any{"city": "Pune"})},
		}
	case strings.Contains(text, "weather in Oslo"):
		return turnResponse{
			Output: "It is snowing in Oslo, -4°C.",
			Events: []any{toolCall("get_weather", map[string]any{"city": "Oslo"})},
		}
	}
	return turnResponse{Output: "Sorry, I can only help with weather and flights."}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8089", "listen address")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		var req turnRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		start := time.Now()
		resp := answer(req)
		resp.Metadata = map[string]any{"handler_ms": time.Since(start).Milliseconds()}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	// The bound address: with -addr 127.0.0.1:0 the port is the kernel's pick.
	log.Printf("http-agent listening on http://%s", ln.Addr())
	log.Fatal(srv.Serve(ln))
}
