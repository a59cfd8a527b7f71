package eventstream

import (
	"unicode/utf8"

	"github.com/iopgw/iop/codec/jsonstrict"
)

// The observer reads each Chat chunk of a tunnelled stream, and nearly all
// of them are alike: an object whose choices carry an index, a delta with
// some text and a finish_reason, beside members nobody reads (id, model,
// created …). scanChat reads such a chunk in one pass over its bytes,
// without building a parse tree (a third of the cost), and gives up on
// anything it would not read exactly as the tree does — the observer
// then parses the chunk (chat) and reads the tree. So the result is the
// tree's whenever scanChat answers, and it answers only for:
//
//   - plain JSON (RFC 8259) nested at most maxScanDepth, with whitespace
//     only where JSON allows it and nothing after the object;
//   - keys without escapes, and no member the observer reads given twice
//     in one object (the tree counts the first: scanChat leaves it);
//   - an error, usage, tool_calls or function_call member only as null,
//     an "object" member that is not "error" (chunks with those are few:
//     the tree reads them);
//   - choices as null or an array of at most maxScanChoices objects, each
//     index a plain non-negative integer, each finish_reason, text and
//     delta text a string or null, each delta an object or null;
//   - strings without control characters and without \u escapes of
//     UTF-16 surrogates (whose decoding the tree does its own way).

// maxScanDepth bounds the nesting scanChat follows (the tree allows 300:
// a deeper chunk is left to it).
const maxScanDepth = 32

// maxScanChoices is how many choices a chunk scanChat reads may have.
const maxScanChoices = 8

// scannedChoice is one choice as chat reads it (chatChoice without tool
// calls, which scanChat leaves to the tree).
type scannedChoice struct {
	index    int
	finished bool
	output   int
}

// chatScan is one chunk's scan.
type chatScan struct {
	b       []byte
	i       int
	n       int // choices read
	choices [maxScanChoices]scannedChoice
}

// scanChat reads a Chat chunk's choices (see above); ok is false when the
// observer must parse it instead.
func scanChat(data []byte) (s chatScan, ok bool) {
	s.b = data
	s.ws()
	var seen members
	if !s.object(func(key []byte) bool { return s.chunkMember(key, &seen) }) {
		return s, false
	}
	s.ws()
	return s, s.i == len(s.b)
}

// chunkMember reads a top-level member's value.
func (s *chatScan) chunkMember(key []byte, seen *members) bool {
	switch string(key) {
	case "choices":
		if !seen.first(0) {
			return false
		}
		if s.peek() == 'n' {
			return s.literal("null")
		}
		return s.array(func() bool { return s.choice() })
	case "error":
		return seen.first(1) && s.literal("null")
	case "usage":
		return seen.first(2) && s.literal("null")
	case "object":
		if !seen.first(3) {
			return false
		}
		if s.peek() != '"' {
			return s.value(1)
		}
		start := s.i
		if _, ok := s.str(); !ok {
			return false
		}
		v := s.b[start+1 : s.i-1]
		return string(v) != "error" && !hasByte(v, '\\')
	}
	return s.value(1)
}

// choice reads one element of choices.
func (s *chatScan) choice() bool {
	if s.n == maxScanChoices || s.peek() != '{' {
		return false
	}
	c := &s.choices[s.n]
	s.n++
	var seen members
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return seen.first(0) && s.index(&c.index)
		case "finish_reason":
			if !seen.first(1) {
				return false
			}
			n, ok := s.text()
			c.finished = n > 0
			return ok
		case "text":
			if !seen.first(2) {
				return false
			}
			n, ok := s.text()
			c.output += n
			return ok
		case "delta":
			if !seen.first(3) {
				return false
			}
			if s.peek() == 'n' {
				return s.literal("null")
			}
			return s.peek() == '{' && s.delta(c)
		}
		return s.value(2)
	})
}

// delta reads a choice's delta.
func (s *chatScan) delta(c *scannedChoice) bool {
	var seen members
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "content", "reasoning_content", "reasoning", "refusal":
			if !seen.first(textMember(key)) {
				return false
			}
			n, ok := s.text()
			c.output += n
			return ok
		case "tool_calls", "function_call":
			return s.literal("null")
		}
		return s.value(3)
	})
}

// text reads a string or null: the string's decoded length.
func (s *chatScan) text() (int, bool) {
	switch s.peek() {
	case 'n':
		return 0, s.literal("null")
	case '"':
		return s.str()
	}
	return 0, false
}

// index reads a plain non-negative integer of at most nine digits.
func (s *chatScan) index(n *int) bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		*n = *n*10 + int(s.b[s.i]-'0')
		s.i++
	}
	d := s.i - start
	if d == 0 || d > 9 || d > 1 && s.b[start] == '0' {
		return false
	}
	return s.i == len(s.b) || !isNumberByte(s.b[s.i])
}

// object reads an object at s.i, handing each member's key to member
// with s.i at its value (member reads the value).
func (s *chatScan) object(member func(key []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		start := s.i
		if _, ok := s.str(); !ok {
			return false
		}
		key := s.b[start+1 : s.i-1]
		if hasByte(key, '\\') {
			return false
		}
		s.ws()
		if s.peek() != ':' {
			return false
		}
		s.i++
		s.ws()
		if !member(key) {
			return false
		}
		if more, ok := s.next('}'); !more {
			return ok
		}
	}
}

// array reads an array at s.i, each element by elem (at s.i).
func (s *chatScan) array(elem func() bool) bool {
	if s.peek() != '[' {
		return false
	}
	s.i++
	s.ws()
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		if more, ok := s.next(']'); !more {
			return ok
		}
	}
}

// next reads what follows a member or an element: a comma (more) or
// the container's close (ok, no more); anything else is not ok.
func (s *chatScan) next(close byte) (more, ok bool) {
	s.ws()
	switch s.peek() {
	case ',':
		s.i++
		s.ws()
		return true, true
	case close:
		s.i++
		return false, true
	}
	return false, false
}

// value skips any value at s.i, nested depth deep.
func (s *chatScan) value(depth int) bool {
	switch c := s.peek(); {
	case c == '{':
		return depth < maxScanDepth && s.object(func([]byte) bool { return s.value(depth + 1) })
	case c == '[':
		return depth < maxScanDepth && s.array(func() bool { return s.value(depth + 1) })
	case c == '"':
		_, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

// str reads the string at s.i and returns its decoded length.
func (s *chatScan) str() (int, bool) {
	n := 0
	for j := s.i + 1; j < len(s.b); {
		start := j
		j = jsonstrict.PlainBytes(s.b, j)
		n += j - start
		if j == len(s.b) {
			break
		}
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return n, true
		case c < 0x20:
			return 0, false
		}
		if j+1 >= len(s.b) {
			return 0, false
		}
		switch s.b[j+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			n++
			j += 2
		case 'u':
			r, ok := jsonstrict.Hex4(s.b, j+2)
			if !ok || r >= 0xD800 && r <= 0xDFFF {
				return 0, false
			}
			n += utf8.RuneLen(r)
			j += 6
		default:
			return 0, false
		}
	}
	return 0, false
}

// number reads a JSON number (RFC 8259's grammar).
func (s *chatScan) number() bool {
	i, ok := jsonstrict.NumberEnd(s.b, s.i)
	if !ok {
		return false
	}
	s.i = i
	return i == len(s.b) || !isNumberByte(s.b[i])
}

// isNumberByte reports whether c could continue a number: what follows
// a number must not (the tree reads such runs its own way).
func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

func (s *chatScan) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return s.i == len(s.b) || !isLetter(s.b[s.i])
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func (s *chatScan) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *chatScan) ws() {
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return // the common case: no whitespace
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func hasByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}
