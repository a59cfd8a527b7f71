package jsonstrict

import (
	"bytes"
	"encoding/json"
)

// Strings checks body as Check does, but for duplicate keys (which it
// allows), and when it passes calls fn for every string value in it
// (never a key), in order, with the key of the member it belongs to (an
// array's elements have the array's key; the top level has none) and its
// text, unescaped. It returns the number of objects, the body's own
// included. It reads the body once more after the check, without
// recursion and without copying what has no escapes (StringsChecked).
func Strings(body []byte, maxDepth int, fn func(key, text []byte)) (objects int, err error) {
	s := scanner{grammarOnly: true}
	if err := s.check(body, maxDepth); err != nil {
		return 0, err
	}
	return StringsChecked(body, fn), nil
}

// StringsChecked is Strings of a body that Check, Unmarshal or Strings
// accepted already (at any depth): the same calls and count, without
// checking it again. Of any other body its answer means nothing, but it
// returns.
func StringsChecked(body []byte, fn func(key, text []byte)) (objects int) {
	var stack [16][]byte
	keys := stack[:0] // the key of each open container
	var key []byte    // the key of the value about to be read
	for i := skipSpace(body, 0); i < len(body); i = skipSpace(body, i) {
		c := body[i]
		if (c == ',' || c == '}' || c == ']') && len(keys) > 0 {
			key = keys[len(keys)-1] // what follows is the container's again
		}
		switch c {
		case '{', '[':
			if c == '{' {
				objects++
			}
			keys = append(keys, key)
			i++
		case '}', ']':
			if len(keys) > 0 {
				keys = keys[:len(keys)-1]
			}
			i++
		case ',', ':':
			i++
		case '"':
			end := skipString(body, i)
			if end-i < 2 || body[end-1] != '"' {
				return objects // unterminated: not a checked body
			}
			if j := skipSpace(body, end); j < len(body) && body[j] == ':' {
				key = unquoted(body[i:end]) // a member's key
			} else {
				fn(key, unquoted(body[i:end]))
			}
			i = end
		default:
			i = skip(body, i) // a number or a literal
		}
	}
	return objects
}

// unquoted is the text of a checked string: its bytes between the
// quotes when it has no escapes.
func unquoted(q []byte) []byte {
	if bytes.IndexByte(q, '\\') < 0 {
		return q[1 : len(q)-1]
	}
	var s string
	_ = json.Unmarshal(q, &s) // checked: it is a valid string
	return []byte(s)
}
