package gateway

import (
	"encoding/json"
	"slices"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/streamgate"
)

// withResume prepares a streaming request of a model whose retry policy
// has resume on: it runs on the translated path (iop must know the text
// the client has, and renders the continuation into the same stream), and
// can be continued after a prefix on any model.
func (g *Gateway) withResume(cfg *Config, sreq *streamgate.Request) {
	run := sreq.Work.Run
	if run == nil || !sreq.Stream || !cfg.RetryPolicy(sreq.Model).Resume {
		return
	}
	translatedOnly(sreq, func(string) bool { return true }) // every attempt: any may be continued
	sreq.Continue = func(model, prefix string) (streamgate.Work, error) {
		r, err := continuation(run, model, prefix)
		return streamgate.Work{Run: r}, err
	}
}

// translatedOnly makes sreq run on the translated path, and each fallback
// model for which translated(model) holds: iop renders those answers.
func translatedOnly(sreq *streamgate.Request, translated func(model string) bool) {
	sreq.Work.Tunnel, sreq.Work.Native = nil, nil
	if rebuild := sreq.RebuildForModel; rebuild != nil {
		sreq.RebuildForModel = func(model string) (streamgate.Work, error) {
			w, err := rebuild(model)
			if w.Run != nil && translated(model) {
				w.Tunnel, w.Native = nil, nil
			}
			return w, err
		}
	}
}

// continuation is run for model, continuing after prefix: the prefix is
// a trailing assistant message, in the neutral messages when the run
// carries them and in its Chat body when it has one (a chat run carries
// its messages in the body alone).
func continuation(run *execution.RunRequest, model, prefix string) (*execution.RunRequest, error) {
	r := *run
	r.Model, r.Continuation = model, true
	if len(run.Messages) > 0 || len(run.ChatBody) == 0 {
		r.Messages = append(slices.Clone(run.Messages), execution.Message{Role: "assistant", Content: prefix})
	}
	if len(run.ChatBody) == 0 {
		return &r, nil
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(run.ChatBody, &body); err != nil {
		return nil, err
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return nil, err
	}
	last, err := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{"assistant", prefix})
	if err != nil {
		return nil, err
	}
	body["messages"], _ = json.Marshal(append(msgs, last))
	body["model"], _ = json.Marshal(model)
	if r.ChatBody, err = json.Marshal(body); err != nil {
		return nil, err
	}
	return &r, nil
}
