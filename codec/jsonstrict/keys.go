package jsonstrict

import (
	"bytes"
	"encoding/json"
	"fmt"
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
