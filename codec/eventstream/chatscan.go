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
	// head is where the value of the chunk's first choices member starts
	// (0: none was read), headSeen the top-level members read before it.
	head     int
	headSeen members
	// textAt and textEnd are where the last text string counted lay (its
	// opening quote, just past its closing one; textAt 0: none), textLen
	// its decoded length and textChoice the choice it counted for: what
	// a memo's template is made of.
	textAt, textEnd, textLen, textChoice int
}

// scanChat reads a Chat chunk's choices (see above); ok is false when the
// observer must parse it instead. Objects and arrays are read by loops
// over their members (begin, key, next), not by callbacks: a chunk is
// some twenty members, and an indirect call each was a fifth of the scan.
func scanChat(data []byte) (s chatScan, ok bool) {
	ok = s.read(data) // before s is returned: the order of a return's operands is not specified
	return s, ok
}

// read is scanChat into s.
func (s *chatScan) read(data []byte) bool {
	*s = chatScan{b: data}
	s.ws()
	if !s.chunk() {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

// chunk reads the chunk's object.
func (s *chatScan) chunk() bool {
	more, ok := s.begin('{', '}')
	if !more {
		return ok
	}
	var seen members
	return s.chunkRest(&seen, nil)
}

// chunkRest reads the chunk's members from the one at s.i through the
// object's close; key, when not nil, is the first one's, already read.
func (s *chatScan) chunkRest(seen *members, key []byte) bool {
	for {
		if key == nil {
			var kok bool
			if key, kok = s.key(); !kok {
				return false
			}
			if s.head == 0 && string(key) == "choices" {
				s.head, s.headSeen = s.i, *seen
			}
		}
		if !s.chunkMember(key, seen) {
			return false
		}
		key = nil
		if more, ok := s.next('}'); !more {
			return ok
		}
	}
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
		return s.choiceList()
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
		_, esc, ok := s.str()
		return ok && !esc && string(s.b[start+1:s.i-1]) != "error"
	}
	return s.value(1)
}

// choiceList reads the choices array.
func (s *chatScan) choiceList() bool {
	more, ok := s.begin('[', ']')
	for more {
		if !s.choice() {
			return false
		}
		if more, ok = s.next(']'); !ok {
			return false
		}
	}
	return ok
}

// choice reads one element of choices.
func (s *chatScan) choice() bool {
	if s.n == maxScanChoices || s.peek() != '{' {
		return false
	}
	c := &s.choices[s.n]
	s.n++
	var seen members
	more, ok := s.begin('{', '}')
	for more {
		key, kok := s.key()
		if !kok || !s.choiceMember(key, c, &seen) {
			return false
		}
		if more, ok = s.next('}'); !ok {
			return false
		}
	}
	return ok
}

// choiceMember reads a member of a choice.
func (s *chatScan) choiceMember(key []byte, c *scannedChoice, seen *members) bool {
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
		n, ok := s.counted()
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
}

// delta reads a choice's delta.
func (s *chatScan) delta(c *scannedChoice) bool {
	var seen members
	more, ok := s.begin('{', '}')
	for more {
		key, kok := s.key()
		if !kok {
			return false
		}
		switch string(key) {
		case "content", "reasoning_content", "reasoning", "refusal":
			if !seen.first(textMember(key)) {
				return false
			}
			n, tok := s.counted()
			c.output += n
			kok = tok
		case "tool_calls", "function_call":
			kok = s.literal("null")
		default:
			kok = s.value(3)
		}
		if !kok {
			return false
		}
		if more, ok = s.next('}'); !ok {
			return false
		}
	}
	return ok
}

// text reads a string or null: the string's decoded length.
func (s *chatScan) text() (int, bool) {
	switch s.peek() {
	case 'n':
		return 0, s.literal("null")
	case '"':
		n, _, ok := s.str()
		return n, ok
	}
	return 0, false
}

// counted reads a text member's value for the choice being read, as
// text does, noting where a string value lay.
func (s *chatScan) counted() (int, bool) {
	at := s.i
	n, ok := s.text()
	if ok && s.b[at] == '"' {
		s.textAt, s.textEnd, s.textLen, s.textChoice = at, s.i, n, s.n-1
	}
	return n, ok
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

// begin reads the open byte of an object or array at s.i: more says a
// member or element follows (at s.i), an empty one is read whole (not
// more, ok); anything else is not ok.
func (s *chatScan) begin(open, close byte) (more, ok bool) {
	if s.peek() != open {
		return false, false
	}
	s.i++
	s.ws()
	if s.peek() == close {
		s.i++
		return false, true
	}
	return true, true
}

// key reads a member's key and its colon, leaving s.i at the value. A
// key with an escape is not read (the tree decodes it).
func (s *chatScan) key() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i
	if _, esc, ok := s.str(); !ok || esc {
		return nil, false
	}
	key := s.b[start+1 : s.i-1]
	s.ws()
	if s.peek() != ':' {
		return nil, false
	}
	s.i++
	s.ws()
	return key, true
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
		return depth < maxScanDepth && s.skipObject(depth)
	case c == '[':
		return depth < maxScanDepth && s.skipArray(depth)
	case c == '"':
		_, _, ok := s.str()
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

// skipObject skips an object whose members are nested depth+1 deep.
func (s *chatScan) skipObject(depth int) bool {
	more, ok := s.begin('{', '}')
	for more {
		if _, kok := s.key(); !kok || !s.value(depth+1) {
			return false
		}
		if more, ok = s.next('}'); !ok {
			return false
		}
	}
	return ok
}

// skipArray skips an array whose elements are nested depth+1 deep.
func (s *chatScan) skipArray(depth int) bool {
	more, ok := s.begin('[', ']')
	for more {
		if !s.value(depth + 1) {
			return false
		}
		if more, ok = s.next(']'); !ok {
			return false
		}
	}
	return ok
}

// str reads the string at s.i: its decoded length, and whether it holds
// an escape.
func (s *chatScan) str() (n int, esc, ok bool) {
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
			return n, esc, true
		case c < 0x20:
			return 0, false, false
		}
		if j+1 >= len(s.b) {
			return 0, false, false
		}
		esc = true
		switch s.b[j+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			n++
			j += 2
		case 'u':
			r, ok := jsonstrict.Hex4(s.b, j+2)
			if !ok || r >= 0xD800 && r <= 0xDFFF {
				return 0, false, false
			}
			n += utf8.RuneLen(r)
			j += 6
		default:
			return 0, false, false
		}
	}
	return 0, false, false
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
