package devapi

// HoldSpool takes n bytes of the server's report spool budget, as a
// report being rendered does, until release (tests of its bound).
func (s *Server) HoldSpool(n int64) (release func(), ok bool) {
	if !s.spool.take(n) {
		return nil, false
	}
	return func() { s.spool.used.Add(-n) }, true
}

// SpoolHeld is the bytes the server's report spools hold now.
func (s *Server) SpoolHeld() int64 { return s.spool.used.Load() }

// StreamBytesRead is the bytes of stored result streams the server read
// so far (adk_devapi_result_stream_bytes_total).
func (s *Server) StreamBytesRead() int64 { return s.streamRead.Load() }

// ServiceErrorOf is the API error a coordinator (or store, or engine)
// error maps to.
func ServiceErrorOf(err error) *Error { return serviceError(err) }
