// Package jsonstrict checks a JSON request body for what encoding/json
// accepts silently but a gateway must refuse: invalid UTF-8 (which Go
// would turn into U+FFFD), lone UTF-16 surrogate escapes (likewise),
// duplicate object keys (so the edge and the provider could see different
// values), and nesting deeper than a limit (stack and CPU abuse). For the
// other direction it has Marshal, which renders without HTML escaping so
// model text reaches clients as written.
package jsonstrict

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// DefaultMaxDepth is the nesting limit when none is given.
const DefaultMaxDepth = 64

// Errors returned by Check. Each is wrapped with where it was found.
var (
	ErrInvalidJSON   = errors.New("invalid JSON")
	ErrInvalidUTF8   = errors.New("invalid UTF-8")
	ErrLoneSurrogate = errors.New("lone UTF-16 surrogate escape")
	ErrDuplicateKey  = errors.New("duplicate key")
	ErrTooDeep       = errors.New("nesting too deep")
	ErrNotAnObject   = errors.New("body must be a JSON object")
	ErrEmptyBody     = errors.New("empty body")
)

// Check validates body as strict JSON whose top level is an object, with
// nesting at most maxDepth (DefaultMaxDepth when <= 0).
func Check(body []byte, maxDepth int) error {
	if err := checkStrict(body, maxDepth); err != nil {
		return err
	}
	if !json.Valid(body) {
		return ErrInvalidJSON
	}
	return nil
}

// Unmarshal checks body as Check does and decodes it into v, reading the
// grammar once: json.Unmarshal validates the whole body before it decodes
// anything, so its syntax error stands for Check's ErrInvalidJSON and a
// second validating pass is saved. A body Check refuses returns Check's
// error (IsCheckError); one that does not fit v, encoding/json's.
func Unmarshal(body []byte, maxDepth int, v any) error {
	if err := checkStrict(body, maxDepth); err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return ErrInvalidJSON
		}
		return err
	}
	return nil
}

// IsCheckError reports whether err is one of Check's refusals (as
// opposed to a decoding error of Unmarshal).
func IsCheckError(err error) bool {
	for _, e := range [...]error{ErrInvalidJSON, ErrInvalidUTF8, ErrLoneSurrogate, ErrDuplicateKey, ErrTooDeep, ErrNotAnObject, ErrEmptyBody} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// checkStrict is Check without the grammar: emptiness, UTF-8, depth,
// duplicate keys and lone surrogates.
func checkStrict(body []byte, maxDepth int) error {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if len(body) == 0 {
		return ErrEmptyBody
	}
	if !utf8.Valid(body) {
		return ErrInvalidUTF8
	}
	// Depth first: the grammar check recurses, so a 10,000-deep body must
	// be refused before it is parsed.
	s := &scanner{buf: body, maxDepth: maxDepth}
	return s.walk()
}

type frame struct {
	object    bool
	expectKey bool
	keys      map[string]struct{}
}

type scanner struct {
	buf      []byte
	maxDepth int
	stack    []frame
	seenTop  bool
}

func (s *scanner) walk() error {
	for i := 0; i < len(s.buf); i++ {
		c := s.buf[i]
		switch c {
		case '{', '[':
			if len(s.stack) == 0 {
				if s.seenTop {
					return ErrInvalidJSON
				}
				if c != '{' {
					return ErrNotAnObject
				}
				s.seenTop = true
			}
			if len(s.stack) >= s.maxDepth {
				return fmt.Errorf("%w: more than %d levels", ErrTooDeep, s.maxDepth)
			}
			s.stack = append(s.stack, frame{object: c == '{', expectKey: c == '{'})
		case '}', ']':
			if len(s.stack) == 0 {
				return ErrInvalidJSON
			}
			s.stack = s.stack[:len(s.stack)-1]
		case ',':
			if top := s.top(); top != nil && top.object {
				top.expectKey = true
			}
		case ':':
			if top := s.top(); top != nil {
				top.expectKey = false
			}
		case '"':
			end, err := s.str(i)
			if err != nil {
				return err
			}
			if top := s.top(); top != nil && top.object && top.expectKey {
				if err := s.key(top, s.buf[i:end+1]); err != nil {
					return err
				}
			}
			i = end
		case ' ', '\t', '\n', '\r':
		default:
			if len(s.stack) == 0 {
				return ErrNotAnObject
			}
		}
	}
	if !s.seenTop {
		return ErrNotAnObject
	}
	return nil
}

func (s *scanner) top() *frame {
	if len(s.stack) == 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

// str scans the string starting at the quote at i and returns the index of
// its closing quote, checking escapes for lone surrogates.
func (s *scanner) str(i int) (int, error) {
	for j := i + 1; j < len(s.buf); j++ {
		switch s.buf[j] {
		case '"':
			return j, nil
		case '\\':
			if j+1 >= len(s.buf) {
				return 0, ErrInvalidJSON
			}
			if s.buf[j+1] != 'u' {
				j++
				continue
			}
			n, err := s.unicodeEscape(j)
			if err != nil {
				return 0, err
			}
			j += n - 1
		default:
			if s.buf[j] < 0x20 {
				return 0, fmt.Errorf("%w: control character in string", ErrInvalidJSON)
			}
		}
	}
	return 0, ErrInvalidJSON
}

// unicodeEscape checks the \uXXXX escape at j (and its pair, for a high
// surrogate) and returns how many bytes it spans.
func (s *scanner) unicodeEscape(j int) (int, error) {
	r, ok := hex4(s.buf, j+2)
	if !ok {
		return 0, ErrInvalidJSON
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, ErrLoneSurrogate
	case r >= 0xD800 && r <= 0xDBFF:
		if j+12 > len(s.buf) || s.buf[j+6] != '\\' || s.buf[j+7] != 'u' {
			return 0, ErrLoneSurrogate
		}
		lo, ok := hex4(s.buf, j+8)
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return 0, ErrLoneSurrogate
		}
		return 12, nil
	}
	return 6, nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (s *scanner) key(f *frame, quoted []byte) error {
	k := string(quoted[1 : len(quoted)-1])
	for _, c := range quoted {
		if c == '\\' {
			if err := json.Unmarshal(quoted, &k); err != nil {
				return ErrInvalidJSON
			}
			break
		}
	}
	if f.keys == nil {
		f.keys = make(map[string]struct{}, 8)
	}
	if _, dup := f.keys[k]; dup {
		return fmt.Errorf("%w %q", ErrDuplicateKey, truncate(k, 64))
	}
	f.keys[k] = struct{}{}
	f.expectKey = false
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
