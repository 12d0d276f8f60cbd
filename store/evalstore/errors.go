package evalstore

import (
	"fmt"

	"github.com/fadcedab/adk/store/evalrecord"
)

// newErr builds a store error with a detail bounded to 256 bytes.
func newErr(code, detail string) *evalrecord.Error {
	if len(detail) > 256 {
		detail = detail[:256]
	}
	return &evalrecord.Error{Code: code, Detail: detail}
}

func errf(code, format string, a ...any) *evalrecord.Error {
	return newErr(code, fmt.Sprintf(format, a...))
}
