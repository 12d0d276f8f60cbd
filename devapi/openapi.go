package devapi

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API's OpenAPI 3.1 description (openapi.json, checked
// in); a test holds its paths and methods equal to the route table.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) openAPI(w http.ResponseWriter, _ *call) *Error {
	return s.writeRaw(w, http.StatusOK, "application/json; charset=utf-8", OpenAPI, MaxResponseBytes)
}
