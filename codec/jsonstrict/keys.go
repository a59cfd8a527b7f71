package jsonstrict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// linearKeys is how many keys an object's duplicate check compares one
// by one; past it the object's keys go into a map, so a body with a
// hundred thousand keys costs linear time, while a request's small
// objects (a message, a content part) allocate nothing.
const linearKeys = 16

// key checks an object member's key (quoted, as written) against the
// keys its object had before and returns it unescaped: as a string for
// a member of the top-level object (Member.Key), else "" (nested keys
// are compared as the body's bytes, never copied unless escaped).
func (s *scanner) key(f *frame, quoted []byte) (string, error) {
	k := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(k, '\\') >= 0 {
		var u string
		if err := json.Unmarshal(quoted, &u); err != nil {
			return "", ErrInvalidJSON
		}
		k = []byte(u)
	}
	if s.seen(f, k) {
		return "", fmt.Errorf("%w %q", ErrDuplicateKey, truncate(string(k), 64))
	}
	s.keys = append(s.keys, k)
	if len(s.stack) == 1 {
		return string(k), nil
	}
	return "", nil
}

// seen reports whether f's object has the key k already, and counts k
// in its map once it has one.
func (s *scanner) seen(f *frame, k []byte) bool {
	if f.set != nil {
		if _, dup := f.set[string(k)]; dup {
			return true
		}
		f.set[string(k)] = struct{}{}
		return false
	}
	prior := s.keys[f.keys0:]
	for _, p := range prior {
		if bytes.Equal(p, k) {
			return true
		}
	}
	if len(prior) >= linearKeys {
		f.set = make(map[string]struct{}, 2*len(prior))
		for _, p := range prior {
			f.set[string(p)] = struct{}{}
		}
		f.set[string(k)] = struct{}{}
	}
	return false
}

// pop closes the innermost open container, forgetting its keys.
func (s *scanner) pop() {
	s.keys = s.keys[:s.stack[len(s.stack)-1].keys0]
	s.stack = s.stack[:len(s.stack)-1]
}

// foldedDuplicate refuses a top-level object with two keys that differ
// only in case ("model" and "MODEL", "stream" and "ſtream"): encoding/json
// — and with it the edge — decodes both into one field, the later one
// winning, where a provider reading keys exactly takes the first, so
// the edge could route, admit and budget a request on values the
// provider never sees. Keys in lower-case ASCII, nearly all of them, are
// their own folded form: a body with none other costs one pass.
func foldedDuplicate(members []Member) error {
	plain := true
	for _, m := range members {
		plain = plain && plainLower(m.Key)
	}
	if plain {
		return nil
	}
	seen := make(map[string]string, len(members)) // folded → as written
	for _, m := range members {
		f := m.Key
		if !plainLower(f) {
			f = foldKey(f)
		}
		if first, dup := seen[f]; dup {
			return fmt.Errorf("%w %q (as %q: keys that differ only in case name one parameter)", ErrDuplicateKey, truncate(first, 64), truncate(m.Key, 64))
		}
		seen[f] = m.Key
	}
	return nil
}

// plainLower reports whether k has no upper-case or non-ASCII letter.
func plainLower(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c >= utf8.RuneSelf || c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return true
}

// foldKey is k with each rune replaced by one member of its case-folding
// orbit (unicode.SimpleFold, as strings.EqualFold and encoding/json fold):
// a lower-case ASCII letter when the orbit has one (so "ſ" and "S" are
// "s", the Kelvin sign "k"), else the orbit's smallest rune. Two keys are
// equal under strings.EqualFold exactly when their foldKeys are equal.
func foldKey(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		if m >= 'A' && m <= 'Z' {
			m += 'a' - 'A'
		}
		b.WriteRune(m)
	}
	return b.String()
}
