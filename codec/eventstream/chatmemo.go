package eventstream

// chatMemo is what an observer keeps of the last chunk scanChat read from
// the start: its bytes up to the value of choices, and the members read
// there. The chunks of one stream nearly all begin alike (the same id,
// object, created, model and fingerprint), and a scan reads the same
// bytes into the same state, so a chunk that begins with those bytes is
// scanned from where its choices start, as if it had been read from its
// first byte.
type chatMemo struct {
	head []byte // a copy; empty: nothing to resume from
	seen members
}

// maxMemoHead bounds the bytes a memo keeps (a stream holds one).
const maxMemoHead = 256

// choicesKey is the key a memo's scan resumes at.
var choicesKey = []byte("choices")

// scan is scanChat, resumed from the memo where data begins with its
// head; a chunk read from the start becomes the memo.
func (m *chatMemo) scan(data []byte) (s chatScan, ok bool) {
	if n := len(m.head); n > 0 && len(data) > n && string(data[:n]) == string(m.head) {
		s.b, s.i = data, n
		seen := m.seen
		s.ws()
		if !s.chunkRest(&seen, choicesKey) {
			return s, false
		}
		s.ws()
		return s, s.i == len(s.b)
	}
	if s, ok = scanChat(data); ok && s.head > 0 && s.head <= maxMemoHead {
		m.head, m.seen = append(m.head[:0], data[:s.head]...), s.headSeen
	}
	return s, ok
}
