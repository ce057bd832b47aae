package httpjson

import (
	"strconv"
	"unicode/utf8"
)

// FastDecoder is implemented by a body type with a hand-written decoder for
// the shape clients send nearly always. Value tries it first: the general
// path (encoding/json, the exact-name walk, the text check) costs several
// times the work of the request's own Redis call on a hot route.
//
// DecodeFast must return true only when it has decoded raw into its
// receiver exactly as the general path would, and when the general path
// would return no error; anything else (an escape, an unknown or repeated
// key, a type it does not expect, text CheckText refuses, invalid JSON)
// must return false and leave the receiver at its zero value, so the
// general path decides, with its own error. The receiver may keep slices
// of raw.
type FastDecoder interface {
	DecodeFast(raw []byte) bool
}

// maxScanDepth bounds the nesting Scanner.Value follows; deeper values go
// to the general path, which has its own limit and error.
const maxScanDepth = 64

// Scanner reads a JSON text for a FastDecoder. It accepts only what it can
// hand over unchanged and be sure encoding/json reads the same way: its
// methods report false for anything else, and the decoder then gives up.
type Scanner struct {
	b []byte
	i int
}

// NewScanner returns a Scanner at the start of b.
func NewScanner(b []byte) Scanner { return Scanner{b: b} }

func (s *Scanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// Byte skips whitespace and consumes c if it comes next.
func (s *Scanner) Byte(c byte) bool {
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// End reports whether only whitespace is left.
func (s *Scanner) End() bool {
	s.skipSpace()
	return s.i == len(s.b)
}

// String reads a string that encoding/json would decode to its bytes as
// they are: no escapes and valid UTF-8. It returns the bytes between the
// quotes, a slice of the input.
func (s *Scanner) String() ([]byte, bool) {
	s.skipSpace()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[start:j]
			if !ascii && !utf8.Valid(v) {
				return nil, false // encoding/json would turn bad bytes into U+FFFD
			}
			s.i = j + 1
			return v, true
		case c == '\\', c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// Int reads a JSON integer that fits a signed integer of bits bits: what
// encoding/json stores into an int field of that size without error. A
// fraction or an exponent ("1.0", "1e3") is refused as encoding/json does.
func (s *Scanner) Int(bits int) (int64, bool) {
	s.skipSpace()
	start := s.i
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	switch {
	case j == digits, s.b[digits] == '0' && j-digits > 1: // no digits, or a leading zero
		return 0, false
	case j < len(s.b) && (s.b[j] == '.' || s.b[j] == 'e' || s.b[j] == 'E'):
		return 0, false
	}
	n, err := strconv.ParseInt(string(s.b[start:j]), 10, bits)
	if err != nil {
		return 0, false
	}
	s.i = j
	return n, true
}

// Value reads any valid JSON value and returns its bytes (a slice of the
// input, without the whitespace around it): what encoding/json stores in a
// json.RawMessage.
func (s *Scanner) Value() ([]byte, bool) {
	s.skipSpace()
	start := s.i
	if !s.value(0) {
		return nil, false
	}
	return s.b[start:s.i], true
}

func (s *Scanner) value(depth int) bool {
	s.skipSpace()
	if s.i >= len(s.b) || depth > maxScanDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.i++
		if s.Byte('}') {
			return true
		}
		for {
			s.skipSpace()
			if !s.anyString() || !s.Byte(':') || !s.value(depth+1) {
				return false
			}
			if s.Byte(',') {
				continue
			}
			return s.Byte('}')
		}
	case c == '[':
		s.i++
		if s.Byte(']') {
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			if s.Byte(',') {
				continue
			}
			return s.Byte(']')
		}
	case c == '"':
		return s.anyString()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return s.literal("true") || s.literal("false") || s.literal("null")
}

// anyString reads a string the JSON grammar allows, escapes included, at
// s.i. Bytes of 0x80 and above are taken as they are, as encoding/json's
// scanner takes them: a raw value keeps them.
func (s *Scanner) anyString() bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(s.b) {
				return false
			}
			switch s.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(s.b) {
					return false
				}
				for _, h := range s.b[j+1 : j+5] {
					if !isHex(h) {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number reads a number of the JSON grammar at s.i:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *Scanner) number() bool {
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	switch {
	case j < len(s.b) && s.b[j] == '0':
		j++
	case j < len(s.b) && s.b[j] >= '1' && s.b[j] <= '9':
		j = digits(s.b, j)
	default:
		return false
	}
	if j < len(s.b) && s.b[j] == '.' {
		k := digits(s.b, j+1)
		if k == j+1 {
			return false
		}
		j = k
	}
	if j < len(s.b) && (s.b[j] == 'e' || s.b[j] == 'E') {
		j++
		if j < len(s.b) && (s.b[j] == '+' || s.b[j] == '-') {
			j++
		}
		k := digits(s.b, j)
		if k == j {
			return false
		}
		j = k
	}
	s.i = j
	return true
}

func digits(b []byte, j int) int {
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	return j
}

func (s *Scanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}
