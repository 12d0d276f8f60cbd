package httpx

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzPlainHead holds readPlainHead, a parser of what a model server sends,
// to net/http's reading of the same bytes: for any answer it either
// declines with nothing consumed (ReadResponse then reads it as before) or
// accepts an answer ReadResponse also reads as a 2xx with the same
// Content-Length, the same Connection: close and the same body, leaving the
// connection's reader at the same byte.
func FuzzPlainHead(f *testing.F) {
	const body = `{"id":"x"}` + "\n"
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n" + body,
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n" + body,
		"HTTP/1.1 201\r\ncontent-length:11\r\nConnection: Keep-Alive\r\n\r\n" + body + "HTTP/1.1 200 OK\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n" + body + "\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Length: 11\r\n\r\n" + body,
		"HTTP/1.1 200 OK\r\nContent-Length: 011\r\n\r\n" + body,
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n" + body,
		"HTTP/1.0 200 OK\r\nContent-Length: 11\r\n\r\n" + body,
		"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 11\r\n\r\n" + body,
		"HTTP/1.1 200 OK\r\nContent-Length: 99999\r\n\r\n" + body,
	} {
		f.Add([]byte(s))
	}
	const limit = 1024
	f.Fuzz(func(t *testing.T, answer []byte) {
		if len(answer) > 16<<10 {
			return
		}
		br := bufio.NewReaderSize(bytes.NewReader(answer), 4<<10)
		h, err := readPlainHead(br, limit)
		if err != nil {
			// Only a connection's error (here: the answer ends before
			// its head does) is returned, and nothing is consumed.
			if !bytes.Contains(answer, []byte("\r\n\r\n")) || len(answer) >= 4<<10 {
				return
			}
			t.Fatalf("error %v for an answer whose head ends within the buffer", err)
		}
		if !h.ok {
			rest, _ := io.ReadAll(br)
			if !bytes.Equal(rest, answer) {
				t.Fatalf("declined but consumed: %q left of %q", rest, answer)
			}
			return
		}
		if h.length < 0 || h.length > limit {
			t.Fatalf("accepted a length %d outside 0..%d", h.length, limit)
		}
		ref := bufio.NewReaderSize(bytes.NewReader(answer), 4<<10)
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/v1", nil)
		resp, err := http.ReadResponse(ref, req)
		if err != nil {
			t.Fatalf("accepted %q, which ReadResponse refuses: %v", answer, err)
		}
		want, wantErr := io.ReadAll(resp.Body)
		got := make([]byte, h.length)
		_, gotErr := io.ReadFull(br, got)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("body errors differ: %v against ReadResponse's %v", gotErr, wantErr)
		}
		if gotErr != nil {
			return // a body cut short: both fail
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 || !bytes.Equal(got, want) ||
			h.length != resp.ContentLength || h.close != resp.Close || br.Buffered() != ref.Buffered() {
			t.Fatalf("%q\nplain: %q len %d close %v; ReadResponse: %d %q len %d close %v",
				answer, got, h.length, h.close, resp.StatusCode, want, resp.ContentLength, resp.Close)
		}
	})
}
