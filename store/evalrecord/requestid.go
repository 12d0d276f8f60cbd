package evalrecord

// MinRequestIDBytes and MaxRequestIDBytes bound a submit's request id
// (coordinator/DESIGN.md "Request path"; the devapi's Idempotency-Key
// header is one).
const (
	MinRequestIDBytes = 16
	MaxRequestIDBytes = 64
)

// ValidRequestID reports whether id is a request id: 16..64 bytes of
// ASCII letters, digits, '-' and '_' (a UUID, or 32 hex digits as the Go
// client sends).
func ValidRequestID(id string) bool {
	if len(id) < MinRequestIDBytes || len(id) > MaxRequestIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}
