package jsonstrict

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Raw is a member's JSON text as it stands in the body Unmarshal
// decoded. Unlike a json.RawMessage it is not a copy: it shares the
// body's memory, so it is valid as long as the body is, and neither may be
// modified while the other is in use. For a large value read once — a
// prompt's content — that is one copy of it fewer.
type Raw []byte

// UnmarshalJSON copies data, as json.RawMessage does: encoding/json (the
// fallback of Unmarshal, and any other decoder) may reuse its input.
func (r *Raw) UnmarshalJSON(data []byte) error {
	*r = append((*r)[:0], data...)
	return nil
}

// Member is one member of a checked JSON object: its key, unescaped, and
// its value's bytes as written.
type Member struct {
	Key   string
	Value []byte
}

// decodeInto decodes a checked body's top-level members into the zero
// struct v as json.Unmarshal would, without encoding/json's own
// validating pass over the whole body: each member's value is handed to
// encoding/json alone, a json.RawMessage is copied as it stands (a Raw
// is shared), and a struct, a pointer to one and a slice of them are
// split into their members here (no key is given twice: Check refuses
// that, so a struct is never decoded into twice) — so
// the bytes of a large message are read by the check and copied (or
// not), not scanned twice more. It reports false when it met anything it does not decode
// exactly as encoding/json does (a key matching a field only in another
// case, a value that does not fit): the caller then zeroes v and lets
// json.Unmarshal decode the body, which gives the same value or error.
func decodeInto(members []Member, v reflect.Value) bool {
	fs := fieldsOf(v.Type())
	if fs == nil {
		return false
	}
	for _, m := range members {
		if !fs.decode(m.Key, m.Value, v) {
			return false
		}
	}
	return true
}

// decodeObject is decodeInto for a checked object's bytes.
func decodeObject(obj []byte, v reflect.Value) bool {
	fs := fieldsOf(v.Type())
	return fs != nil && eachMember(obj, func(key, val []byte) bool {
		if bytes.IndexByte(key, '\\') >= 0 {
			return fs.decode(unquoteKey(key), val, v)
		}
		return fs.decode(string(key[1:len(key)-1]), val, v)
	})
}

// decode decodes the member key: val into its field of v (false: decode
// the whole body with encoding/json instead).
func (fs *fields) decode(key string, val []byte, v reflect.Value) bool {
	i, ok := fs.index[key]
	if !ok {
		return !fs.folds(key) // encoding/json ignores unknown keys
	}
	return decodeValue(val, v.Field(i), fs.custom[i])
}

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	rawType             = reflect.TypeFor[Raw]()
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// custom reports whether encoding/json decodes a t with t's own method
// (UnmarshalJSON or UnmarshalText, on t or on *t).
func custom(t reflect.Type) bool {
	for _, u := range [...]reflect.Type{unmarshalerType, textUnmarshalerType} {
		if t.Implements(u) || t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(u) {
			return true
		}
	}
	return false
}

// decodeValue decodes raw into the field f; custom: f's type decodes
// itself (see custom), so encoding/json must call its method.
func decodeValue(raw []byte, f reflect.Value, custom bool) bool {
	switch {
	case f.Type() == rawMessageType && raw[0] != 'n':
		f.SetBytes(append([]byte(nil), raw...)) // RawMessage.UnmarshalJSON copies too
		return true
	case f.Type() == rawType:
		f.SetBytes(raw[:len(raw):len(raw)]) // shared, capped: an append copies
		return true
	case custom:
	case raw[0] == '[' && f.Kind() == reflect.Slice && f.IsNil() && fieldsOf(f.Type().Elem()) != nil:
		return decodeStructs(raw, f)
	case raw[0] == '{' && f.Kind() == reflect.Struct && fieldsOf(f.Type()) != nil:
		return decodeObject(raw, f)
	case raw[0] == '{' && f.Kind() == reflect.Pointer && f.IsNil() && fieldsOf(f.Type().Elem()) != nil:
		p := reflect.New(f.Type().Elem())
		if !decodeObject(raw, p.Elem()) {
			return false
		}
		f.Set(p)
		return true
	default:
		if ok, done := decodeScalar(raw, f); done {
			return ok
		}
	}
	return json.Unmarshal(raw, f.Addr().Interface()) == nil
}

// decodeStructs decodes a checked array into the nil slice of structs f
// (its own frame: the element buffer is not on the stack of every value).
func decodeStructs(arr []byte, f reflect.Value) bool {
	elems := make([][]byte, 0, 16)
	eachElement(arr, func(e []byte) { elems = append(elems, e) })
	out := reflect.MakeSlice(f.Type(), len(elems), len(elems))
	for i, e := range elems {
		if e[0] != '{' || !decodeObject(e, out.Index(i)) {
			return false
		}
	}
	f.Set(out)
	return true
}

// decodeScalar decodes the common scalars directly, as encoding/json
// would: null into a pointer, and a string without escapes, a boolean or
// a number into a string, bool, integer or float (or a pointer to one).
// done is false for anything else; ok is false where encoding/json would
// fail.
func decodeScalar(raw []byte, f reflect.Value) (ok, done bool) {
	if f.Kind() == reflect.Pointer {
		if raw[0] == 'n' {
			f.SetZero()
			return true, true
		}
		p := reflect.New(f.Type().Elem())
		if ok, done = decodeScalar(raw, p.Elem()); done && ok {
			f.Set(p)
		}
		return ok, done
	}
	switch k := f.Kind(); {
	case k == reflect.String && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0:
		f.SetString(string(raw[1 : len(raw)-1])) // checked: valid UTF-8, no control characters
	case k == reflect.Bool && (raw[0] == 't' || raw[0] == 'f'):
		f.SetBool(raw[0] == 't')
	case k >= reflect.Int && k <= reflect.Int64 && numeric(raw[0]):
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || f.OverflowInt(n) {
			return false, true
		}
		f.SetInt(n)
	case (k == reflect.Float64 || k == reflect.Float32) && numeric(raw[0]):
		n, err := strconv.ParseFloat(string(raw), f.Type().Bits())
		if err != nil || f.OverflowFloat(n) {
			return false, true
		}
		f.SetFloat(n)
	default:
		return false, false
	}
	return true, true
}

func numeric(c byte) bool { return c == '-' || c >= '0' && c <= '9' }

// fields is what decodeInto needs of a struct type: its JSON names, and
// by field index whether the field's type decodes itself.
type fields struct {
	index  map[string]int
	names  []string
	custom []bool
}

// folds reports whether key names a field in another case (encoding/json
// would decode it into that field).
func (fs *fields) folds(key string) bool {
	for _, n := range fs.names {
		if strings.EqualFold(key, n) {
			return true
		}
	}
	return false
}

var fieldCache sync.Map // reflect.Type → *fields (nil: not a plain struct)

// fieldsOf returns the JSON fields of t, or nil unless t is a struct
// whose fields encoding/json maps one to one by their names: no embedded
// structs, no ",string" options, no names it would reject.
// The answer is cached per type, custom types' nil included: the
// method-set checks run once a type, not once a value.
func fieldsOf(t reflect.Type) *fields {
	if t.Kind() != reflect.Struct {
		return nil
	}
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*fields)
	}
	var fs *fields
	if !custom(t) {
		fs = plainFields(t)
	}
	fieldCache.Store(t, fs)
	return fs
}

func plainFields(t reflect.Type) *fields {
	fs := &fields{index: map[string]int{}, custom: make([]bool, t.NumField())}
	for i := range t.NumField() {
		f := t.Field(i)
		fs.custom[i] = custom(f.Type)
		if f.Anonymous {
			return nil
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",string,") || !plainName(name) {
			return nil
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := fs.index[name]; dup {
			return nil
		}
		fs.index[name] = i
		fs.names = append(fs.names, name)
	}
	return fs
}

func plainName(s string) bool {
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// eachMember calls fn with the quoted key and the value of each member
// of a checked object, until fn returns false; it reports whether every
// call returned true.
func eachMember(obj []byte, fn func(key, val []byte) bool) bool {
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		end := skip(obj, i)
		j := skipSpace(obj, skipSpace(obj, end)+1) // past the colon
		vend := skip(obj, j)
		if !fn(obj[i:end], obj[j:vend]) {
			return false
		}
		if i = skipSpace(obj, vend); obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return true
}

// eachElement calls fn with each element of a checked array.
func eachElement(arr []byte, fn func([]byte)) {
	i := skipSpace(arr, 1)
	for i < len(arr) && arr[i] != ']' {
		end := skip(arr, i)
		fn(arr[i:end])
		if i = skipSpace(arr, end); arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
}

func unquoteKey(q []byte) string {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1])
	}
	var k string
	_ = json.Unmarshal(q, &k) // checked: it is a valid string
	return k
}

// skip returns where the checked value at i ends.
func skip(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// skipString returns the index past the closing quote of the checked
// string at i: the first quote not escaped by an odd run of backslashes.
func skipString(b []byte, i int) int {
	for j := i + 1; ; {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return len(b)
		}
		j += q
		n := 0
		for k := j - 1; b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// UnmarshalChecked decodes raw into v as json.Unmarshal does, where raw
// is a value inside a body Check (or Unmarshal) accepted: what Unmarshal
// decodes without validating again (a string without escapes, a slice of
// structs split here, a raw message copied) is decoded the same way, the
// rest, and any value that does not fit, by json.Unmarshal. Bytes Check
// never saw must go to json.Unmarshal instead.
func UnmarshalChecked(raw []byte, v any) error {
	if rv := reflect.ValueOf(v); len(raw) > 0 && rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().IsZero() {
		f := rv.Elem()
		if decodeValue(raw, f, custom(f.Type())) {
			return nil
		}
		f.SetZero()
	}
	return json.Unmarshal(raw, v)
}
