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
		out = append(append(out, body[last:p.content]...), model...)
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

// formParts finds the parts of a multipart body by its delimiters
// (RFC 2046 §5.1.1): a delimiter line is "--" and the boundary, at the
// body's start or after a line break, then optional white space and a
// line break; the last is followed by "--". Lines break with CRLF, or
// LF alone where the body's first delimiter line does (as Go's reader
// accepts).
func formParts(body []byte, boundary string) ([]formPart, error) {
	dash := []byte("--" + boundary)
	i := 0
	if !bytes.HasPrefix(body, dash) {
		j := bytes.Index(body, append([]byte("\n"), dash...))
		if j < 0 {
			return nil, errors.New("multipart: no delimiter")
		}
		i = j + 1
	}
	nl := []byte("\r\n")
	if k := bytes.IndexByte(body[i:], '\n'); k > 0 && body[i+k-1] != '\r' {
		nl = []byte("\n")
	}
	next := append(append([]byte{}, nl...), dash...)
	var parts []formPart
	for {
		i += len(dash)
		if bytes.HasPrefix(body[i:], []byte("--")) {
			return parts, nil // the close delimiter
		}
		k := bytes.Index(body[i:], nl)
		if k < 0 || len(bytes.Trim(body[i:i+k], " \t\r")) != 0 {
			return nil, errors.New("multipart: a malformed delimiter line")
		}
		start := i + k + len(nl)
		var header []byte
		content := start
		if !bytes.HasPrefix(body[start:], nl) {
			h := bytes.Index(body[start:], append(append([]byte{}, nl...), nl...))
			if h < 0 {
				return nil, errors.New("multipart: a part's header is not ended")
			}
			header = body[start : start+h+2*len(nl)]
			content = start + h + 2*len(nl)
		} else {
			content = start + len(nl)
		}
		e := bytes.Index(body[content:], next)
		if e < 0 {
			return nil, errors.New("multipart: a part is not ended")
		}
		parts = append(parts, formPart{header: header, content: content, end: content + e})
		i = content + e + len(nl)
	}
}
