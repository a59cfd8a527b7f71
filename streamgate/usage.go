package streamgate

import (
	"bytes"

	"github.com/valyala/fastjson"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/codec/jsonstrict"
	"github.com/iopgw/iop/execution"
)

// Usage estimation: every answer a client received is charged. When the
// upstream reports usage, that is the usage; when it does not (a stream
// without include_usage, a client cancel or a cut before the usage
// chunk, a stall or an error after commit), the runtime estimates it
// from what it forwarded, never changing a byte the client receives:
//
//   - prompt: the request's PromptEstimate (EstimatePromptTokens of its
//     body);
//   - completion: the larger of the number of events that carried output
//     (streaming servers send about one token per event) and the output
//     text's bytes / bytesPerToken (BPE tokenizers average about four
//     bytes of English per token).
//
// The estimate is marked (Summary.UsageEstimated) wherever usage shows.
const bytesPerToken = 4

// EstimatePromptTokens estimates the prompt tokens of a request body: the
// text of its string values (every one but the model name) at
// bytesPerToken, plus perObjectTokens for each object (a message, a
// content part, a tool: the framing a chat template adds; the body's own
// object stands for the reply's priming), and
// imageTokens for an inline data: URL (an image or audio clip, whose
// base64 is not text). A body that is not JSON counts a token per
// bytesPerToken of it.
//
// A small body is read with a pooled fastjson parser; a large one (over
// estimateWalkBytes) in one pass with jsonstrict, which neither copies
// it nor builds a tree (the same estimate: FuzzEstimateOneReadMatchesParse).
func EstimatePromptTokens(body []byte) int64 {
	if len(body) <= estimateWalkBytes {
		return estimateParsed(body)
	}
	var t tally
	objects, err := jsonstrict.Strings(body, 0, t.add)
	if err != nil {
		return estimateParsed(body) // not strict JSON: as fastjson reads it
	}
	t.objects = int64(objects)
	return t.estimate()
}

// EstimateCheckedPromptTokens is EstimatePromptTokens of a body that
// jsonstrict's check accepted already (a surface's decode did): walked
// once, not checked a second time first, at any size (without a parse
// tree, a third faster than the pooled parser even on a small body).
func EstimateCheckedPromptTokens(body []byte) int64 {
	var t tally
	t.objects = int64(jsonstrict.StringsChecked(body, t.add))
	return t.estimate()
}

// tally is what the prompt estimate counts of a body.
type tally struct{ text, objects, media int64 }

// add counts the string value s of the member key: not the model's name,
// an inline data: URL as media, anything else as text.
func (t *tally) add(key, s []byte) {
	switch {
	case string(key) == "model":
	case bytes.HasPrefix(s, []byte("data:")):
		t.media++
	default:
		t.text += int64(len(s))
	}
}

func (t *tally) estimate() int64 {
	return (t.text+bytesPerToken-1)/bytesPerToken + perObjectTokens*t.objects + imageTokens*t.media
}

// estimateWalkBytes is the size above which a body's estimate is read
// without a parse tree: below it the pooled parser is faster.
const estimateWalkBytes = 64 << 10

// estimateParsed is EstimatePromptTokens read with fastjson: of a small
// body, and of a large one jsonstrict refuses (nesting past its limit,
// not JSON at all).
func estimateParsed(body []byte) (n int64) {
	eventstream.ParseWhole(body, func(v *fastjson.Value, err error) {
		if err != nil {
			n = (int64(len(body)) + bytesPerToken - 1) / bytesPerToken
			return
		}
		var t tally
		var walk func(key []byte, v *fastjson.Value)
		walk = func(key []byte, v *fastjson.Value) {
			switch v.Type() {
			case fastjson.TypeString:
				t.add(key, v.GetStringBytes())
			case fastjson.TypeObject:
				t.objects++
				v.GetObject().Visit(walk)
			case fastjson.TypeArray:
				for _, c := range v.GetArray() {
					walk(key, c)
				}
			}
		}
		walk(nil, v)
		n = t.estimate()
	})
	return n
}

// The prompt estimate's framing and media rates: OpenAI's chat format
// adds about three tokens per message; a high-detail 1024×1024 image
// costs 765.
const (
	perObjectTokens = 3
	imageTokens     = 765
)

// EstimateUsage is the usage charged for out delivered to a prompt of
// about prompt tokens.
func EstimateUsage(prompt int64, out eventstream.Output) *execution.TokenUsage {
	completion := max(out.Events, (out.Bytes+bytesPerToken-1)/bytesPerToken)
	return &execution.TokenUsage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

// eventOutput is the generated output of a normalized event.
func eventOutput(ev execution.RunEvent) eventstream.Output {
	n := len(ev.Delta) + len(ev.Reasoning) + len(ev.Message)
	for _, tc := range ev.ToolCalls {
		n += len(tc.Name) + len(tc.Arguments)
	}
	if n == 0 {
		return eventstream.Output{}
	}
	return eventstream.Output{Bytes: int64(n), Events: 1}
}

// delivered is the output of an attempt that reached the client: what
// the tunnel's observer saw of a stream, a buffered answer's body, or the
// normalized events rendered.
func (ar *attemptRun) delivered() eventstream.Output {
	t := ar.tun
	switch {
	case t == nil:
		return ar.rendered
	case t.obs != nil:
		return t.obs.Output
	case t.outputRead:
		return t.output
	case t.mode == tunnelBuffer && t.buf != nil:
		return eventstream.BodyOutput(t.buf)
	}
	return eventstream.Output{}
}

// settleUsage fills the summary's usage with an estimate when no attempt
// reported one and the client got an answer (or left after the request
// reached a provider): nothing delivered is free.
//
// What is charged: output that reached the client (a whole answer or a
// cut one), a successful answer even without text, and a client that
// left after its request reached a provider. An error answer (the
// upstream's or the gateway's) with no output is not charged.
func (rt *runtime) settleUsage() {
	if u := rt.sum.Usage; u != nil {
		// A resumed stream: what an attempt without reported usage
		// delivered (the cut one, typically) is added as an estimate.
		if rt.unreported.Bytes > 0 || rt.unreported.Events > 0 {
			est := EstimateUsage(0, rt.unreported).CompletionTokens
			sum := *u
			sum.CompletionTokens += est
			sum.TotalTokens += est
			rt.sum.Usage, rt.sum.UsageEstimated = &sum, true
		}
		return
	}
	if rt.attempts == 0 {
		return
	}
	delivered := rt.output.Bytes > 0 || rt.output.Events > 0
	succeeded := rt.sum.Outcome == "" && rt.resp.State() != TransportUncommitted // Serve names it "ok" after this
	left := rt.sum.Outcome == "client_cancelled" || rt.sum.Outcome == "slow_client_cut"
	if !delivered && !succeeded && !left {
		return
	}
	rt.sum.Usage, rt.sum.UsageEstimated = EstimateUsage(rt.req.PromptEstimate, rt.output), true
}
