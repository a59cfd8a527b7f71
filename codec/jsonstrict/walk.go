package jsonstrict

import "fmt"

// frame is one open object or array of the walk.
type frame struct {
	object bool
	keys0  int                 // where the object's keys start in scanner.keys
	set    map[string]struct{} // its keys, once it has more than linearKeys
}

// scanner walks a body once, checking the JSON grammar (RFC 8259, as
// encoding/json reads it) together with the strict rules, and records
// the members of the top-level object.
type scanner struct {
	buf       []byte
	maxDepth  int
	stack     []frame
	members   []Member
	keys      [][]byte // the keys of the open objects, innermost last (see key)
	start     int      // where the value of the last top-level member starts
	first     [8]Member
	firstKeys [32][]byte
	// grammarOnly skips what only Check needs: duplicate keys (and so
	// the keys themselves) and the top-level members.
	grammarOnly bool
}

// walk checks the whole body: one object, then only whitespace.
func (s *scanner) walk() error {
	b := s.buf
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return ErrNotAnObject
	}
	for {
		var opened bool
		var err error
		if i, opened, err = s.value(skipSpace(b, i)); err != nil {
			return err
		}
		if opened {
			continue
		}
		if i, err = s.next(i); err != nil {
			return err
		}
		if len(s.stack) == 0 {
			break
		}
	}
	if i = skipSpace(b, i); i < len(b) {
		switch b[i] {
		case '{', '[', '"':
			return ErrInvalidJSON
		}
		return ErrNotAnObject
	}
	return nil
}

// value reads the value at i: a scalar or an empty container whole
// (opened false, i past it), or the opening of a container whose first
// value starts at the returned i (opened true).
func (s *scanner) value(i int) (int, bool, error) {
	b := s.buf
	if i >= len(b) {
		return 0, false, ErrInvalidJSON
	}
	switch c := b[i]; c {
	case '{', '[':
		if len(s.stack) >= s.maxDepth {
			return 0, false, fmt.Errorf("%w: more than %d levels", ErrTooDeep, s.maxDepth)
		}
		s.stack = append(s.stack, frame{object: c == '{', keys0: len(s.keys)})
		j := skipSpace(b, i+1)
		if j < len(b) && b[j] == c+2 { // '}' is '{'+2, ']' is '['+2
			s.pop()
			return s.ended(j + 1), false, nil
		}
		if c == '[' {
			return j, true, nil
		}
		j, err := s.member(j)
		return j, true, err
	case '"':
		end, err := s.str(i)
		if err != nil {
			return 0, false, err
		}
		return s.ended(end + 1), false, nil
	case 't':
		return s.literal(i, "true")
	case 'f':
		return s.literal(i, "false")
	case 'n':
		return s.literal(i, "null")
	}
	j, ok := NumberEnd(b, i)
	if !ok {
		return 0, false, ErrInvalidJSON
	}
	return s.ended(j), false, nil
}

func (s *scanner) literal(i int, lit string) (int, bool, error) {
	if len(s.buf)-i < len(lit) || string(s.buf[i:i+len(lit)]) != lit {
		return 0, false, ErrInvalidJSON
	}
	return s.ended(i + len(lit)), false, nil
}

// next reads what follows a value at i: closing brackets, then a comma
// and the start of the next value (with its key, in an object). It
// returns at the next value, or once the top-level object closed.
func (s *scanner) next(i int) (int, error) {
	b := s.buf
	for len(s.stack) > 0 {
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, ErrInvalidJSON
		}
		top := &s.stack[len(s.stack)-1]
		switch b[i] {
		case ',':
			if top.object {
				return s.member(skipSpace(b, i+1))
			}
			return skipSpace(b, i+1), nil
		case '}', ']':
			if (b[i] == '}') != top.object {
				return 0, ErrInvalidJSON
			}
			s.pop()
			i = s.ended(i + 1)
		default:
			return 0, ErrInvalidJSON
		}
	}
	return i, nil
}

// member reads an object member's key and colon at i and returns where
// its value starts.
func (s *scanner) member(i int) (int, error) {
	b := s.buf
	if i >= len(b) || b[i] != '"' {
		return 0, ErrInvalidJSON
	}
	end, err := s.str(i)
	if err != nil {
		return 0, err
	}
	var k string
	if !s.grammarOnly {
		if k, err = s.key(&s.stack[len(s.stack)-1], b[i:end+1]); err != nil {
			return 0, err
		}
	}
	j := skipSpace(b, end+1)
	if j >= len(b) || b[j] != ':' {
		return 0, ErrInvalidJSON
	}
	j = skipSpace(b, j+1)
	if len(s.stack) == 1 && !s.grammarOnly {
		s.members = append(s.members, Member{Key: k})
		s.start = j
	}
	return j, nil
}

// ended notes that a value ended at i: a value of the top-level object
// is recorded whole.
func (s *scanner) ended(i int) int {
	if len(s.stack) == 1 && len(s.members) > 0 {
		s.members[len(s.members)-1].Value = s.buf[s.start:i]
	}
	return i
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
