package httpapi

import (
	"strconv"

	"github.com/delayq/delayq/internal/httpjson"
)

var _ httpjson.FastDecoder = (*EnqueueRequest)(nil)

// DecodeFast decodes the body most clients send, in one pass over it
// (httpjson.FastDecoder): an object of the documented fields, each once,
// strings without escapes, integers as integers. Anything else returns
// false with r zeroed, and the general decoder decides and names the
// error.
func (r *EnqueueRequest) DecodeFast(raw []byte) bool {
	if !r.decodeFast(raw) {
		*r = EnqueueRequest{}
		return false
	}
	return true
}

// The fields of EnqueueRequest, as bits, to refuse a repeated key (the
// general decoder's answer to one depends on the values).
const (
	fieldID = 1 << iota
	fieldPayload
	fieldPayloadBase64
	fieldDelayMs
	fieldRunAt
	fieldMaxAttempts
	fieldPartitionKey
	fieldPriority
	fieldOrderingKey
)

func (r *EnqueueRequest) decodeFast(raw []byte) bool {
	s := httpjson.NewScanner(raw)
	if !s.Byte('{') {
		return false
	}
	if s.Byte('}') {
		return s.End()
	}
	seen := 0
	for {
		key, ok := s.String()
		if !ok || !s.Byte(':') {
			return false
		}
		var field int
		switch string(key) {
		case "id":
			field = fieldID
			v, ok := s.String()
			if !ok {
				return false
			}
			r.ID = string(v)
			if httpjson.CheckText("id", r.ID) != nil {
				return false
			}
		case "payload":
			field = fieldPayload
			v, ok := s.Value()
			if !ok {
				return false
			}
			r.Payload = v
		case "payload_base64":
			field = fieldPayloadBase64
			v, ok := s.String()
			if !ok {
				return false
			}
			b64 := string(v)
			r.PayloadBase64 = &b64
		case "delay_ms":
			field = fieldDelayMs
			n, ok := s.Int(64)
			if !ok {
				return false
			}
			r.DelayMs = &n
		case "run_at":
			field = fieldRunAt
			n, ok := s.Int(64)
			if !ok {
				return false
			}
			r.RunAt = &n
		case "max_attempts":
			field = fieldMaxAttempts
			n, ok := s.Int(strconv.IntSize)
			if !ok {
				return false
			}
			m := int(n)
			r.MaxAttempts = &m
		case "priority":
			field = fieldPriority
			n, ok := s.Int(strconv.IntSize)
			if !ok {
				return false
			}
			r.Priority = int(n)
		case "ordering_key":
			field = fieldOrderingKey
			v, ok := s.String()
			if !ok {
				return false
			}
			r.OrderingKey = string(v)
			if httpjson.CheckText("ordering_key", r.OrderingKey) != nil {
				return false
			}
		case "partition_key":
			field = fieldPartitionKey
			v, ok := s.String()
			if !ok {
				return false
			}
			r.PartitionKey = string(v)
			if httpjson.CheckText("partition_key", r.PartitionKey) != nil {
				return false
			}
		default:
			return false
		}
		if seen&field != 0 {
			return false
		}
		seen |= field
		if s.Byte(',') {
			continue
		}
		return s.Byte('}') && s.End()
	}
}

// appendJSON appends res as json.Encoder writes it (newline included), for
// the strings that need no escaping; ok is false for the others, which
// json.Encoder then writes (with its HTML-safe escapes).
func (res EnqueueResponse) appendJSON(b []byte) (_ []byte, ok bool) {
	if !plainJSON(res.ID) || !plainJSON(res.Topic) || res.Finished != nil {
		return b, false
	}
	b = append(b, `{"id":"`...)
	b = append(b, res.ID...)
	b = append(b, `","topic":"`...)
	b = append(b, res.Topic...)
	b = append(b, '"')
	if res.RunAt != 0 {
		b = append(b, `,"run_at":`...)
		b = strconv.AppendInt(b, res.RunAt, 10)
	}
	b = append(b, `,"duplicate":`...)
	b = strconv.AppendBool(b, res.Duplicate)
	return append(b, "}\n"...), true
}

// plainJSON reports whether json.Encoder writes s between its quotes as it
// is: printable ASCII other than the quote, the backslash and the HTML
// characters it escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
