package openai

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
)

// formOf builds a form as an SDK does: fields, then files, by
// mime/multipart's writer.
func formOf(t testing.TB, fields [][2]string, files map[string][]byte) ([]byte, string) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, f := range fields {
		if err := w.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range files {
		fw, err := w.CreateFormFile(name, name+".wav")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write(data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.Boundary()
}

// partsOf reads a form back with mime/multipart's reader: each part's
// headers and content, in order.
func partsOf(t testing.TB, body []byte, boundary string) (parts []struct {
	h textproto.MIMEHeader
	v string
}) {
	r := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := r.NextRawPart()
		if err == io.EOF {
			return parts
		}
		if err != nil {
			t.Fatalf("the form does not read back: %v\n%q", err, body)
		}
		v, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, struct {
			h textproto.MIMEHeader
			v string
		}{p.Header, string(v)})
	}
}

// TestWithFormModelChangesOnlyTheModel: an SDK's form, its audio file
// holding the word "model" and bytes that look like delimiters, gets the
// new model, and reads back part for part the same but for the model's
// value; every byte before and after the value is the client's.
func TestWithFormModelChangesOnlyTheModel(t *testing.T) {
	audio := []byte("RIFF\r\n--\r\nname=\"model\"\r\n\r\nwhisper\x00\xff")
	body, boundary := formOf(t, [][2]string{{"model", "whisper"}, {"language", "en"}}, map[string][]byte{"file": audio})
	out, err := WithFormModel(body, boundary, "iop-sim")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(body, []byte("\r\n\r\nwhisper\r\n")) + 4
	if want := string(body[:i]) + "iop-sim" + string(body[i+len("whisper"):]); string(out) != want {
		t.Fatalf("rewritten form:\n%q\nwant\n%q", out, want)
	}
	before, after := partsOf(t, body, boundary), partsOf(t, out, boundary)
	if len(after) != 3 || after[0].v != "iop-sim" || after[2].v != string(audio) {
		t.Fatalf("parts after: %+v", after)
	}
	after[0].v = "whisper"
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("parts other than the model changed:\n%+v\n%+v", before, after)
	}
	if got, err := WithBodyModel(body, "multipart/form-data; boundary="+boundary, "iop-sim"); err != nil || !bytes.Equal(got, out) {
		t.Fatalf("WithBodyModel for a form: %q %v", got, err)
	}
	if got, err := WithBodyModel([]byte(`{"model":"a","input":"x"}`), "application/json", "b"); err != nil || string(got) != `{"model":"b","input":"x"}` {
		t.Fatalf("WithBodyModel for JSON: %s %v", got, err)
	}
}

// TestWithFormModelShapes: a preamble and an epilogue, LF line breaks, a
// part without headers, a file part named "model" (left alone) and a
// model field given twice (both replaced); a form without a model field
// or with a broken delimiter is an error, never a guess.
func TestWithFormModelShapes(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"preamble and epilogue": {
			"preamble\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nold\r\n--b--\r\nepilogue",
			"preamble\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nnew\r\n--b--\r\nepilogue"},
		"LF line breaks": {
			"--b\nContent-Disposition: form-data; name=\"x\"\n\n1\n--b\nContent-Disposition: form-data; name=model\n\nold\n--b--\n",
			"--b\nContent-Disposition: form-data; name=\"x\"\n\n1\n--b\nContent-Disposition: form-data; name=model\n\nnew\n--b--\n"},
		"a part without headers, white space after a delimiter": {
			"--b \t\r\n\r\nanonymous\r\n--b\r\ncontent-disposition: form-data; name=\"model\"\r\n\r\n\r\n--b--",
			"--b \t\r\n\r\nanonymous\r\n--b\r\ncontent-disposition: form-data; name=\"model\"\r\n\r\nnew\r\n--b--"},
		"the boundary inside a part, a preamble line that starts with it": {
			"--bx\r\n--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\"\r\n\r\n\r\n--bb\r\n--b-x\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nold\r\n--b--",
			"--bx\r\n--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\"\r\n\r\n\r\n--bb\r\n--b-x\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nnew\r\n--b--"},
		"a file named model, the field twice": {
			"--b\r\nContent-Disposition: form-data; name=\"model\"; filename=\"m.bin\"\r\n\r\nold\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nold\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nolder\r\n--b--\r\n",
			"--b\r\nContent-Disposition: form-data; name=\"model\"; filename=\"m.bin\"\r\n\r\nold\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nnew\r\n--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nnew\r\n--b--\r\n"},
	} {
		got, err := WithFormModel([]byte(tc.in), "b", "new")
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %q %v\nwant %q", name, got, err, tc.want)
		}
	}
	for name, in := range map[string]string{
		"no model field":       "--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--b--\r\n",
		"no delimiter":         "Content-Disposition: form-data; name=\"model\"\r\n\r\nold\r\n",
		"an unended part":      "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nold",
		"an unended header":    "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n",
		"a longer boundary":    "--bb\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nold\r\n--bb--\r\n",
		"not multipart at all": `{"model":"old"}`,
	} {
		if got, err := WithFormModel([]byte(in), "b", "new"); err == nil {
			t.Errorf("%s: rewritten as %q", name, got)
		}
	}
}

// FuzzWithFormModel: a form an SDK writes, with any field values and
// file bytes, reads back after the rewrite with the new model and every
// other part as it was; any body Go's reader reads whole, with a model
// field, is rewritten too (what the edge routed, it can send); and no
// body makes the rewrite panic.
func FuzzWithFormModel(f *testing.F) {
	f.Add("whisper", "en", []byte("RIFF\r\n--\r\n"), "iop-sim", []byte("--b\r\n\r\n--b--"))
	f.Add("m", "", []byte{}, "n", []byte("x\n--b \nContent-Disposition: form-data; name=model\n\nold\n--b--\n"))
	f.Add("m", "", []byte{}, "n", []byte("--b\r\nContent-Disposition: FORM-DATA; name=\"model\"; filename=\"\"\r\n\r\nold\r\n--b--"))
	f.Add("m", "", []byte{}, "n", []byte("--bx\r\n--b\r\nContent-Disposition: form-data; name=f; filename=a\r\n\r\n\r\n--bb\r\n--b-x\r\n--b\t\r\nContent-Disposition: form-data; name=model\r\n\r\nold\r\n--b-- \r\n"))
	f.Add("m", "", []byte{}, "n", []byte("--b\r\nContent-Disposition: form-data;\r\n name=model\r\nX: y\r\n\r\nold\r\n--b\r\n\r\n\r\n--b--\r\nz"))
	f.Fuzz(func(t *testing.T, model, lang string, audio []byte, to string, raw []byte) {
		out, err := WithFormModel(raw, "b", to)
		if readsWithModel(raw, "b") && !strings.ContainsAny(to, "\r\n") {
			if err != nil {
				t.Fatalf("Go's reader reads %q whole with a model field; the rewrite failed: %v", raw, err)
			}
			sameButModel(t, partsOf(t, raw, "b"), partsOf(t, out, "b"), to)
		}
		if model == "" || strings.ContainsAny(model+lang+to, "\r\n") {
			return
		}
		body, boundary := formOf(t, [][2]string{{"language", lang}, {"model", model}}, map[string][]byte{"file": audio})
		out, err = WithFormModel(body, boundary, to)
		if err != nil {
			t.Fatal(err)
		}
		before, after := partsOf(t, body, boundary), partsOf(t, out, boundary)
		if len(after) != 3 || after[1].v != to {
			t.Fatalf("parts after: %+v", after)
		}
		after[1].v = model
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("parts other than the model changed:\n%+v\n%+v", before, after)
		}
	})
}

// readsWithModel reports whether Go's multipart reader reads body whole,
// to its close delimiter, and finds a model field in it (as the edge's
// decode does).
func readsWithModel(body []byte, boundary string) bool {
	r := multipart.NewReader(bytes.NewReader(body), boundary)
	found := false
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return found
		}
		if err != nil {
			return false
		}
		if p.FormName() == "model" && p.FileName() == "" {
			found = true
		}
		if _, err := io.Copy(io.Discard, p); err != nil {
			return false
		}
	}
}

// sameButModel fails t unless after holds before's parts with the same
// headers, the model fields' values to and every other value as it was.
func sameButModel(t *testing.T, before, after []struct {
	h textproto.MIMEHeader
	v string
}, to string) {
	t.Helper()
	if len(after) != len(before) {
		t.Fatalf("%d parts after the rewrite, %d before", len(after), len(before))
	}
	for i := range before {
		want := before[i].v
		if (formPart{header: []byte(headerBlock(before[i].h))}).isModel() {
			want = to
		}
		if !reflect.DeepEqual(after[i].h, before[i].h) || after[i].v != want {
			t.Fatalf("part %d after the rewrite: %q %q, want %q %q", i, after[i].h, after[i].v, before[i].h, want)
		}
	}
}

// headerBlock writes a part's header back as a header block.
func headerBlock(h textproto.MIMEHeader) string {
	var b strings.Builder
	for k, vs := range h {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	return b.String() + "\r\n"
}
