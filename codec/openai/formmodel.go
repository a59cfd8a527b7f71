package openai

import (
	"bufio"
	"bytes"
	"errors"
	"mime"
	"net/textproto"
)

// WithBodyModel is WithModel for a request body of either kind OpenAI's
// API takes: a multipart/form-data body (an audio file to transcribe, an
// image to edit) has its "model" field's value replaced (WithFormModel),
// any other is JSON.
func WithBodyModel(body []byte, contentType, model string) ([]byte, error) {
	if mt, params, err := mime.ParseMediaType(contentType); err == nil && mt == "multipart/form-data" {
		return WithFormModel(body, params["boundary"], model)
	}
	return WithModel(body, model)
}

// WithFormModel returns the multipart/form-data body with the value of
// its "model" field replaced — of every such field, so no reader of the
// form sees another — and every other byte unchanged: the parts, their
// headers, the files and the boundaries stay as the client sent them.
// A form without a model field is an error (the edge routes by it).
func WithFormModel(body []byte, boundary, model string) ([]byte, error) {
	if boundary == "" {
		return nil, errors.New("multipart: no boundary")
	}
	parts, err := formParts(body, boundary)
	if err != nil {
		return nil, err
	}
	var out []byte
	last := 0
	for _, p := range parts {
		if !p.isModel() {
			continue
		}
		out = append(append(append(out, body[last:p.content]...), model...), p.bare...)
		last = p.end
	}
	if out == nil {
		return nil, errors.New("multipart: the form has no model field")
	}
	return append(out, body[last:]...), nil
}

// formPart is where one part of a multipart body lies in it: its header
// block, and its content from content up to end (the line break before
// the next delimiter not included).
type formPart struct {
	header       []byte
	content, end int
	// bare holds the line break the next delimiter left out after empty
	// content (nil otherwise): content written in its place needs it.
	bare []byte
}

// isModel reports whether the part is the form field "model" (a field,
// not a file), as Go's reader, which the edge routes by, reads a part:
// an empty filename makes no file.
func (p formPart) isModel() bool {
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(p.header))).ReadMIMEHeader()
	if err != nil {
		return false
	}
	disp, params, err := mime.ParseMediaType(h.Get("Content-Disposition"))
	if err != nil || disp != "form-data" {
		return false
	}
	return params["name"] == "model" && params["filename"] == ""
}

// formParts finds the parts of a multipart body by its delimiters as
// Go's reader, which the edge routes by, finds them (RFC 2046 §5.1.1): a
// delimiter line is "--" and the boundary at a line's start, then
// optional spaces or tabs and a line break; the last is followed by
// "--". Lines break with CRLF, or LF alone where the first delimiter
// line does. Within a part, the boundary followed by anything else is
// content, as it is to Go's reader; a preamble's lines are skipped.
func formParts(body []byte, boundary string) ([]formPart, error) {
	dash := []byte("--" + boundary)
	i, nl, ok := firstDelimiter(body, dash)
	if !ok {
		return nil, errors.New("multipart: no delimiter")
	}
	var parts []formPart
	for {
		end, final, ok := delimiterLine(body, i+len(dash), nl)
		switch {
		case !ok:
			return nil, errors.New("multipart: a malformed delimiter line")
		case final:
			return parts, nil
		}
		content, ok := headerEnd(body, end)
		if !ok {
			// A header block the body ends in: Go's reader takes the
			// form to end before that part.
			return parts, nil
		}
		p, next, err := partAt(body, formPart{header: body[end:content], content: content}, nl, dash)
		if err != nil {
			return nil, err
		}
		parts, i = append(parts, p), next
	}
}

// firstDelimiter finds the first delimiter line, at the body's start or
// after a line break, and the line break its line ends with.
func firstDelimiter(body, dash []byte) (at int, nl []byte, ok bool) {
	for at := 0; at < len(body); {
		if bytes.HasPrefix(body[at:], dash) {
			rest := bytes.TrimLeft(body[at+len(dash):], " \t")
			switch {
			case bytes.HasPrefix(rest, []byte("\r\n")):
				return at, []byte("\r\n"), true
			case bytes.HasPrefix(rest, []byte("\n")):
				return at, []byte("\n"), true
			}
		}
		k := bytes.IndexByte(body[at:], '\n')
		if k < 0 {
			break
		}
		at += k + 1
	}
	return 0, nil, false
}

// delimiterLine reads the rest of a delimiter line from j, just after
// its boundary: the close delimiter's "--", or spaces or tabs and the
// line break, which end says the end of.
func delimiterLine(body []byte, j int, nl []byte) (end int, final, ok bool) {
	if bytes.HasPrefix(body[j:], []byte("--")) {
		return j + 2, true, true
	}
	rest := bytes.TrimLeft(body[j:], " \t")
	if !bytes.HasPrefix(rest, nl) {
		return 0, false, false
	}
	return len(body) - len(rest) + len(nl), false, true
}

// partAt finds where the content of part p, whose header block has been
// read, ends: at the line break of the next delimiter, whose boundary
// starts at next.
func partAt(body []byte, p formPart, nl, dash []byte) (_ formPart, next int, err error) {
	// Empty content may leave out the delimiter's line break.
	if bytes.HasPrefix(body[p.content:], dash) && delimits(body, p.content+len(dash)) {
		p.end, p.bare = p.content, nl
		return p, p.end, nil
	}
	delim := append(append([]byte{}, nl...), dash...)
	for from := p.content; ; {
		e := bytes.Index(body[from:], delim)
		if e < 0 {
			return p, 0, errors.New("multipart: a part is not ended")
		}
		if j := from + e + len(delim); !delimits(body, j) {
			from = j
			continue
		}
		p.end = from + e
		return p, p.end + len(nl), nil
	}
}

// delimits reports whether the boundary that ends at j is a delimiter:
// white space, a line break or "--" follows it (or nothing); otherwise
// it is a part's content.
func delimits(body []byte, j int) bool {
	return j == len(body) || bytes.IndexByte([]byte(" \t\r\n"), body[j]) >= 0 || bytes.HasPrefix(body[j:], []byte("--"))
}

// headerEnd finds where a part's header block that starts at start ends:
// after its blank line. A header line ends with LF or CRLF, whatever the
// delimiters use, as Go's header reader takes it.
func headerEnd(body []byte, start int) (int, bool) {
	for at := start; ; {
		switch {
		case bytes.HasPrefix(body[at:], []byte("\r\n")):
			return at + 2, true
		case bytes.HasPrefix(body[at:], []byte("\n")):
			return at + 1, true
		}
		k := bytes.IndexByte(body[at:], '\n')
		if k < 0 {
			return 0, false
		}
		at += k + 1
	}
}
