package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled JSON Schema (tool parameters, output schemas). It is
// immutable and safe to share between runners.
type Schema struct {
	doc      map[string]any
	compiled *jsonschema.Schema
}

// CompileSchema compiles a JSON Schema document. No $ref may leave the
// document: the compiler has no loaders, so file and network references
// fail instead of reading the disk or the network.
func CompileSchema(doc map[string]any) (*Schema, error) {
	if doc == nil {
		return nil, nil
	}
	// Round-trip through the validator's own decoder so numbers are
	// json.Number, as the library expects.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	// One compiler per schema, so a fixed location keeps messages stable.
	const loc = "mem://schema.json"
	if err := c.AddResource(loc, v); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &Schema{doc: doc, compiled: s}, nil
}

// Doc returns the schema document (shared; do not modify).
func (s *Schema) Doc() map[string]any {
	if s == nil {
		return nil
	}
	return s.doc
}

// Validate checks a JSON value (maps, slices, strings, float64/json.Number,
// bools, nil) against the schema. The error message names the failing
// locations and keywords, bounded in size.
func (s *Schema) Validate(v any) error {
	if s == nil {
		return nil
	}
	if err := s.compiled.Validate(v); err != nil {
		return fmt.Errorf("%s", boundedMessage(err))
	}
	return nil
}

// boundedMessage flattens a validation error to one line of at most 512
// bytes.
func boundedMessage(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if len(msg) > 512 {
		msg = msg[:509] + "..."
	}
	return msg
}
