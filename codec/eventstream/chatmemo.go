package eventstream

// chatMemo is what an observer keeps of the last chunk scanChat read from
// the start: its bytes up to the value of choices, and the members read
// there. The chunks of one stream nearly all begin alike (the same id,
// object, created, model and fingerprint), and a scan reads the same
// bytes into the same state, so a chunk that begins with those bytes is
// scanned from where its choices start, as if it had been read from its
// first byte.
//
// A chunk that has the bytes of the memo's template around a string of
// its own is not scanned at all past that string.
type chatMemo struct {
	head []byte // a copy; empty: nothing to resume from
	seen members
	tmpl chatTemplate
}

// maxMemoHead bounds the bytes a memo keeps (a stream holds one).
const maxMemoHead = 256

// choicesKey is the key a memo's scan resumes at.
var choicesKey = []byte("choices")

// scan is scanChat by the memo's template where data matches it, else
// resumed from the memo where data begins with its head; a chunk read
// from the start gives the memo its head, and one read whole its
// template.
func (m *chatMemo) scan(data []byte, s *chatScan) bool {
	if m.tmpl.match(data, s) {
		return true
	}
	var ok bool
	if n := len(m.head); n > 0 && len(data) > n && string(data[:n]) == string(m.head) {
		*s = chatScan{b: data, i: n}
		seen := m.seen
		s.ws()
		ok = s.chunkRest(&seen, choicesKey)
		s.ws()
		ok = ok && s.i == len(s.b)
	} else if ok = s.read(data); ok && s.head > 0 && s.head <= maxMemoHead {
		m.head, m.seen = append(m.head[:0], data[:s.head]...), s.headSeen
	}
	if ok {
		m.tmpl.keep(s)
	}
	return ok
}

// chatTemplate is the last chunk read whole whose last text member was a
// string, kept without that string: the bytes before its opening quote
// and those after its closing one, and what the scan read, the string's
// length taken out of its choice's output. The content chunks of a
// stream are nearly all that chunk with another string. A chunk made of
// the same bytes around a string of its own reads as that chunk did
// plus its own string's length: the scan reads the same bytes before
// the string into the same state; the string moves it by its length and
// adds only to that output; nothing the scan does depends on an output
// read so far, so the same bytes after it are read as before.
type chatTemplate struct {
	b       []byte // the bytes before the string, then those after it
	at      int    // where the string began (0: no template)
	choice  int    // the choice whose output it counted for
	n       int
	choices [maxScanChoices]scannedChoice
}

// maxMemoTemplate bounds the bytes a template keeps.
const maxMemoTemplate = 512

// match reads data by the template: ok when data is the template's bytes
// around a string, which alone is scanned.
func (t *chatTemplate) match(data []byte, s *chatScan) bool {
	at := t.at
	if at == 0 || len(data) <= at || data[at] != '"' || string(data[:at]) != string(t.b[:at]) {
		return false
	}
	s.b, s.i = data, at
	n, _, ok := s.str()
	if !ok || string(data[s.i:]) != string(t.b[at:]) {
		return false
	}
	s.n = copy(s.choices[:], t.choices[:t.n])
	s.choices[t.choice].output += n
	return true
}

// keep makes the chunk s read whole the template, when it counted a
// string and what surrounds it fits.
func (t *chatTemplate) keep(s *chatScan) {
	size := s.textAt + len(s.b) - s.textEnd
	if s.textAt == 0 || size > maxMemoTemplate {
		return
	}
	if cap(t.b) < size {
		t.b = make([]byte, 0, size)
	}
	t.b = append(append(t.b[:0], s.b[:s.textAt]...), s.b[s.textEnd:]...)
	t.at, t.choice, t.n, t.choices = s.textAt, s.textChoice, s.n, s.choices
	t.choices[t.choice].output -= s.textLen
}
