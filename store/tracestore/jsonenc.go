package tracestore

import (
	"strconv"

	"github.com/fadcedab/adk/internal/jsonquote"
)

// appendRecord encodes the stored record {content_pruned?, cursor, event,
// identity, kind, timestamp_ms} with sorted keys, as encoding/json would
// encode the same map (TestAppendRecord_MatchesTheMapEncoding).
func appendRecord(b []byte, cursor uint64, kind string, tsMS int64, pj *projected) []byte {
	b = append(b, '{')
	if pj.pruned {
		b = append(b, `"content_pruned":true,`...)
	}
	b = append(b, `"cursor":`...)
	b = strconv.AppendUint(b, cursor, 10)
	b = append(b, `,"event":`...)
	b = pj.event.appendJSON(b)
	b = append(b, `,"identity":{`...)
	first := true
	for i, k := range identityKeys { // sorted
		v := pj.identity[i]
		if v == "" {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, v)
	}
	b = append(b, `},"kind":`...)
	b = appendJSONString(b, kind)
	b = append(b, `,"timestamp_ms":`...)
	b = strconv.AppendInt(b, tsMS, 10)
	return append(b, '}')
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// appendJSONString quotes s as encoding/json does without HTML escaping
// (the stored records' form), through the module's one quoter.
func appendJSONString[T string | []byte](b []byte, s T) []byte {
	return jsonquote.Append(b, s, jsonquote.Plain)
}
