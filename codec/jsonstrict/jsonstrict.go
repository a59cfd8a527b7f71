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
	"reflect"
	"sync"
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
// nesting at most maxDepth (DefaultMaxDepth when <= 0): the grammar and
// the strict rules in one pass.
func Check(body []byte, maxDepth int) error {
	s, err := check(body, maxDepth)
	s.release()
	return err
}

// Unmarshal checks body as Check does and decodes it into v as
// json.Unmarshal does. The check reads the grammar, so encoding/json
// need not validate the whole body again: a zero struct is decoded
// member by member (decodeInto), anything else by json.Unmarshal. A body
// Check refuses returns Check's error (IsCheckError); one that does not
// fit v, encoding/json's. A Raw field decoded member by member shares
// body's memory (see Raw).
func Unmarshal(body []byte, maxDepth int, v any) error { return unmarshal(body, maxDepth, v, false) }

// Decode is Unmarshal into a new T. A struct is decoded member by member
// without first being asked whether it is zero, which it is: for a
// request's wire struct of some sixty fields, reflect's IsZero walks
// every one.
func Decode[T any](body []byte, maxDepth int) (T, error) {
	var v T
	err := unmarshal(body, maxDepth, &v, true)
	return v, err
}

// unmarshal is Unmarshal; fresh says v points at a zero value.
func unmarshal(body []byte, maxDepth int, v any, fresh bool) error {
	s, err := check(body, maxDepth)
	defer s.release()
	if err != nil {
		return err
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.Struct && (fresh || rv.Elem().IsZero()) {
		if decodeInto(s.members, rv.Elem()) {
			return nil
		}
		rv.Elem().SetZero()
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

// check is Check, returning the walk (with the top-level members).
func check(body []byte, maxDepth int) (*scanner, error) {
	s := scanners.Get().(*scanner)
	s.members, s.keys = s.first[:0], s.firstKeys[:0]
	if err := s.check(body, maxDepth); err != nil {
		return s, err
	}
	return s, foldedDuplicate(s.members)
}

// scanners recycle check's walks (a scanner holds room for the first
// members and keys of a body: 1.2 KB a request made each time).
var scanners = sync.Pool{New: func() any { return new(scanner) }}

// release returns s to scanners, holding nothing of the body it walked.
func (s *scanner) release() {
	clear(s.first[:])
	clear(s.firstKeys[:])
	clear(s.stack)
	s.buf, s.maxDepth, s.stack, s.members, s.keys, s.start, s.grammarOnly = nil, 0, s.stack[:0], nil, nil, 0, false
	scanners.Put(s)
}

// check walks body: emptiness and UTF-8 first, then the grammar and the
// strict rules (the walk keeps its own stack, bounded by maxDepth: a
// 10,000-deep body is refused at its 65th level, never recursed into).
func (s *scanner) check(body []byte, maxDepth int) error {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if len(body) == 0 {
		return ErrEmptyBody
	}
	if !utf8.Valid(body) {
		return ErrInvalidUTF8
	}
	s.buf, s.maxDepth = body, maxDepth
	return s.walk()
}

// str scans the string starting at the quote at i and returns the index of
// its closing quote, checking escapes for lone surrogates.
func (s *scanner) str(i int) (int, error) {
	for j := i + 1; j < len(s.buf); j++ {
		if j = PlainBytes(s.buf, j); j >= len(s.buf) {
			break
		}
		switch s.buf[j] {
		case '"':
			return j, nil
		case '\\':
			if j+1 >= len(s.buf) {
				return 0, ErrInvalidJSON
			}
			switch s.buf[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
				continue
			case 'u':
			default:
				return 0, fmt.Errorf("%w: invalid escape in string", ErrInvalidJSON)
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
	r, ok := Hex4(s.buf, j+2)
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
		lo, ok := Hex4(s.buf, j+8)
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return 0, ErrLoneSurrogate
		}
		return 12, nil
	}
	return 6, nil
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
