package ollama

import (
	"strings"
	"testing"
	"time"
)

// TestEmbedTranslation: both request forms decode; the OpenAI body carries
// model, inputs and dimensions; answers map back by index, and an answer
// that does not match the request is an error, never a made-up vector.
func TestEmbedTranslation(t *testing.T) {
	r, e := DecodeEmbed([]byte(`{"model":"m","input":["a","b"],"dimensions":4,"truncate":true}`), false)
	if e != nil || len(r.Input) != 2 || *r.Dimensions != 4 {
		t.Fatalf("decode: %+v %v", r, e)
	}
	if got := string(r.OpenAIBody()); got != `{"model":"m","input":["a","b"],"dimensions":4}` {
		t.Fatalf("OpenAI body %s", got)
	}
	out, err := r.FromOpenAI([]byte(`{"data":[{"index":1,"embedding":[2]},{"index":0,"embedding":[1]}],"usage":{"prompt_tokens":2}}`), time.Second)
	if err != nil || string(out) != `{"model":"m","embeddings":[[1],[2]],"total_duration":1000000000,"load_duration":0,"prompt_eval_count":2}` {
		t.Fatalf("answer %s %v", out, err)
	}
	for _, bad := range []string{`{"data":[{"index":0,"embedding":[1]}]}`, `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}`, `not json`} {
		if _, err := r.FromOpenAI([]byte(bad), 0); err == nil {
			t.Errorf("%s translated", bad)
		}
	}
	l, e := DecodeEmbed([]byte(`{"model":"m","prompt":"a"}`), true)
	if e != nil || len(l.Input) != 1 {
		t.Fatalf("legacy decode %+v %v", l, e)
	}
	if out, err := l.FromOpenAI([]byte(`{"data":[{"index":0,"embedding":[0.5]}]}`), 0); err != nil || string(out) != `{"embedding":[0.5]}` {
		t.Fatalf("legacy answer %s %v", out, err)
	}
	for body, param := range map[string]string{`{"input":"x"}`: "model", `{"model":"m","input":[1]}`: "input",
		`{"model":"m","input":"x","dimensions":0}`: "dimensions"} {
		if _, e := DecodeEmbed([]byte(body), false); e == nil || !strings.Contains(e.Param, param) {
			t.Errorf("%s: %v, want an error on %s", body, e, param)
		}
	}
}

// TestEmbedLoad: a request with nothing to embed — an empty input string
// or array, a null input, an empty prompt — is Ollama's load of an
// embedding model, answered with no embeddings.
func TestEmbedLoad(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"m","input":""}`:    `{"model":"m","embeddings":[]}`,
		`{"model":"m","input":[]}`:    `{"model":"m","embeddings":[]}`,
		`{"model":"m","input":null}`:  `{"model":"m","embeddings":[]}`,
		`{"model":"m"}`:               `{"model":"m","embeddings":[]}`,
		`{"model":"m","prompt":""}`:   `{"embedding":[]}`,
		`{"model":"m","prompt":null}`: `{"embedding":[]}`,
	} {
		r, e := DecodeEmbed([]byte(body), strings.Contains(body, "prompt"))
		if body == `{"model":"m"}` {
			l, e := DecodeEmbed([]byte(body), true)
			if e != nil || string(l.LoadAnswer()) != `{"embedding":[]}` {
				t.Errorf("legacy %s: %+v %v", body, l, e)
			}
		}
		if e != nil || len(r.Input) != 0 || string(r.LoadAnswer()) != want {
			t.Errorf("%s: %+v %v, answer %s", body, r, e, r.LoadAnswer())
		}
	}
}
