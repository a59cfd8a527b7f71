// Package eventstream reads upstream response streams incrementally, as
// they pass through iop, without changing a byte: Server-Sent Events by
// the WHATWG HTML "event stream interpretation" rules and NDJSON lines.
// Every place iop looks inside a stream (the tunnel's end tracking and
// Responses sequence numbers, usage observation, the normalized readers)
// goes through this one reader, so an upstream's framing choices — a
// space after "data:" or none, LF, CRLF or CR line ends, comments,
// multi-line data, events split across any read boundary — never change
// what iop concludes. Events are recognised by parsing the framing and
// decoding the JSON (see Observer), never by searching raw bytes.
package eventstream

import (
	"bytes"
)

// Format is the framing of a stream.
type Format int

// The framings.
const (
	FormatSSE    Format = iota // text/event-stream
	FormatNDJSON               // application/x-ndjson: one JSON value per line
)

// Event is one dispatched event. For SSE, Name is the event field (""
// when absent, which the spec dispatches as "message"), Data the data
// lines joined with "\n", ID the last event id. For NDJSON, Data is the
// line without its end. Data is only valid during the callback.
type Event struct {
	Name string
	Data []byte
	ID   string
	// Oversize marks an event whose data passed the reader's limit; its
	// Data is empty. The bytes still went through unchanged.
	Oversize bool
}

// DefaultMaxEvent bounds one event's data when no limit is given.
const DefaultMaxEvent = 16 << 20

// Reader splits a stream into events as bytes arrive. It is not safe for
// concurrent use.
type Reader struct {
	format   Format
	max      int
	line     []byte // the current, unfinished line
	lineOver bool   // the current line passed max
	skipLF   bool   // the last chunk ended in CR: a leading LF ends nothing
	bom      int    // bytes of a leading UTF-8 BOM matched; 3 = done

	// SSE event being built. Its data is ref — a slice of the bytes Feed
	// was given — while it is one data line of those bytes (the common
	// event, read without a copy), else data, which the reader owns; an
	// event still open when Feed returns is copied into data then.
	name    string
	data    []byte
	ref     []byte
	inRef   bool
	hasData bool
	over    bool
	lastID  string
}

// NewReader returns a reader of the given framing whose events are at
// most max bytes of data (DefaultMaxEvent when max <= 0).
func NewReader(f Format, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxEvent
	}
	return &Reader{format: f, max: max}
}

// Feed reads p, calling fn for every event it completes. A line whole in
// p is read where it is; only a line or an event that p leaves unfinished
// is copied, to be finished by the next Feed.
func (r *Reader) Feed(p []byte, fn func(Event)) {
	p = r.skipBOM(p, fn)
	var ends lineEnds
	for len(p) > 0 {
		if r.skipLF {
			r.skipLF = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := ends.next(p)
		if i < 0 {
			r.appendLine(p)
			break
		}
		if len(r.line) == 0 && !r.lineOver && i <= r.lineLimit() {
			r.endLine(p[:i], false, true, fn) // whole in p: no copy
		} else {
			r.appendLine(p[:i])
			line, over := r.line, r.lineOver
			r.line, r.lineOver = r.line[:0], false
			r.endLine(line, over, false, fn)
		}
		if p[i] == '\r' {
			if i+1 < len(p) {
				if p[i+1] == '\n' {
					i++
				}
			} else {
				r.skipLF = true
			}
		}
		p = p[i+1:]
	}
	r.own()
}

// own copies an open event's data out of the bytes Feed was given, which
// are not the reader's once it returns.
func (r *Reader) own() {
	if r.inRef {
		r.data = append(r.data[:0], r.ref...)
		r.ref, r.inRef = nil, false
	}
}

// lineEnds finds where lines end (a CR or an LF) in the successive tails
// of one buffer. It remembers the next LF by its distance from the
// buffer's end, so no byte is scanned for an LF twice, and looks for a CR
// only before that LF: two vectorised scans, linear in the buffer
// whichever line ends it uses (bytes.IndexAny tests every byte against
// a set, three times slower on a typical chunk).
type lineEnds struct {
	lf      int  // the next LF's distance from the buffer's end; 0: none
	scanned bool // lf is known
}

// next is the index of the first CR or LF in p, a tail of the buffer, or -1.
func (e *lineEnds) next(p []byte) int {
	if !e.scanned || e.lf > len(p) {
		e.scanned, e.lf = true, 0
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			e.lf = len(p) - i
		}
	}
	head, lf := p, -1
	if e.lf > 0 {
		lf = len(p) - e.lf
		head = p[:lf]
	}
	if cr := bytes.IndexByte(head, '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// Close ends the stream: an unfinished last line or event that carries
// data is dispatched (tolerant of upstreams that omit the final blank
// line or newline, as common SSE clients are).
func (r *Reader) Close(fn func(Event)) {
	if r.bom > 0 && r.bom < len(bom) {
		matched := bom[:r.bom]
		r.bom = len(bom)
		r.Feed(matched, fn)
	}
	if len(r.line) > 0 || r.lineOver {
		line, over := r.line, r.lineOver
		r.line, r.lineOver = r.line[:0], false
		r.endLine(line, over, false, fn)
	}
	if r.format == FormatSSE {
		r.dispatch(fn)
	}
}

var bom = []byte("\xEF\xBB\xBF")

// skipBOM drops a UTF-8 byte order mark at the start of the stream, even
// when it arrives split.
func (r *Reader) skipBOM(p []byte, fn func(Event)) []byte {
	for r.bom < len(bom) && len(p) > 0 {
		if p[0] != bom[r.bom] {
			matched := bom[:r.bom]
			r.bom = len(bom)
			r.Feed(matched, fn)
			return p
		}
		r.bom++
		p = p[1:]
	}
	return p
}

func (r *Reader) appendLine(p []byte) {
	if r.lineOver {
		return
	}
	if len(r.line)+len(p) > r.lineLimit() {
		r.lineOver, r.line = true, r.line[:0]
		return
	}
	r.line = append(r.line, p...)
}

// lineLimit is the longest line the reader reads: a field name and colon
// on top of max data. A longer one spoils its event (Oversize).
func (r *Reader) lineLimit() int { return r.max + 64 }

// endLine handles a finished line; inP says it lies in the bytes Feed
// was given (not in the reader's own buffer).
func (r *Reader) endLine(line []byte, over, inP bool, fn func(Event)) {
	if r.format == FormatNDJSON {
		if over {
			fn(Event{Oversize: true})
			return
		}
		if len(bytes.TrimSpace(line)) > 0 {
			fn(Event{Data: line})
		}
		return
	}
	if over {
		r.over, r.hasData = true, true // a field too long spoils its event
		return
	}
	r.field(line, inP, fn)
}

// field interprets one SSE line (inP as for endLine).
func (r *Reader) field(line []byte, inP bool, fn func(Event)) {
	if len(line) == 0 {
		r.dispatch(fn)
		return
	}
	if line[0] == ':' {
		return // comment
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		r.name = string(value)
	case "data":
		r.dataLine(value, inP)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.lastID = string(value)
		}
	}
}

// dataLine adds a data line's value to the event: its first line stays
// where it is when it lies in Feed's bytes; a second is joined to it
// with a newline in the reader's own buffer.
func (r *Reader) dataLine(value []byte, inP bool) {
	n, sep := len(r.data), 0
	if r.inRef {
		n = len(r.ref)
	}
	if r.hasData {
		sep = 1
	}
	first := !r.hasData
	r.hasData = true
	switch {
	case r.over:
	case n+sep+len(value) > r.max:
		r.over, r.data, r.ref, r.inRef = true, r.data[:0], nil, false
	case first && inP:
		r.ref, r.inRef = value, true
	default:
		r.own()
		if sep == 1 {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
	}
}

func (r *Reader) dispatch(fn func(Event)) {
	if !r.hasData {
		r.name = ""
		return
	}
	ev := Event{Name: r.name, Data: r.data, ID: r.lastID, Oversize: r.over}
	switch {
	case r.over:
		ev.Data = nil
	case r.inRef:
		ev.Data = r.ref
	}
	fn(ev)
	r.name, r.data, r.ref, r.inRef, r.hasData, r.over = "", r.data[:0], nil, false, false, false
}
