package openai

import (
	"encoding/json"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/execution"
)

// completionRead is what CompletionEvents reads of a chat.completion.
type completionRead struct {
	ID                string `json:"id"`
	Model             string `json:"model"`
	Created           int64  `json:"created"`
	SystemFingerprint string `json:"system_fingerprint"`
	ServiceTier       string `json:"service_tier"`
	Choices           []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			Refusal      json.RawMessage `json:"refusal"`
			Annotations  json.RawMessage `json:"annotations"`
			Audio        json.RawMessage `json:"audio"`
			FunctionCall json.RawMessage `json:"function_call"`
		} `json:"message"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason string          `json:"finish_reason"`
		StopNamed
	} `json:"choices"`
	Usage *eventstream.Usage `json:"usage"`
}

// CompletionEvents reads a whole chat.completion as the events of its
// answer: its identity (a start event), the first choice's message (one
// delta: content, reasoning, tool calls), then complete with its finish
// reason (and the stop sequence, when the server named it) and usage. ok
// is false for a body that is not a chat completion with a choice. lost
// names what those events cannot carry — another
// choice, log probabilities, a refusal, annotations, audio, a legacy
// function_call — "" when they carry the whole answer.
func CompletionEvents(body []byte) (evs []execution.RunEvent, lost string, ok bool) {
	var c completionRead
	if json.Unmarshal(body, &c) != nil || len(c.Choices) == 0 {
		return nil, "", false
	}
	ch := c.Choices[0]
	m := ch.Message
	switch {
	case len(c.Choices) > 1:
		lost = "choices[1]"
	case len(nonNull(ch.Logprobs)) > 0:
		lost = "choices[0].logprobs"
	case len(nonNull(m.Refusal)) > 0:
		lost = "choices[0].message.refusal"
	case len(nonNull(m.Annotations)) > 0 && string(m.Annotations) != "[]":
		lost = "choices[0].message.annotations"
	case len(nonNull(m.Audio)) > 0:
		lost = "choices[0].message.audio"
	case len(nonNull(m.FunctionCall)) > 0:
		lost = "choices[0].message.function_call"
	}
	evs = append(evs, execution.RunEvent{Type: execution.EventTypeStart, Model: c.Model, ResponseID: c.ID, Created: c.Created,
		SystemFingerprint: c.SystemFingerprint, ServiceTier: c.ServiceTier})
	ev := execution.RunEvent{Type: execution.EventTypeDelta}
	if m.Content != nil {
		ev.Delta = *m.Content
	}
	if m.ReasoningContent != nil {
		ev.Reasoning = *m.ReasoningContent
	} else if m.Reasoning != nil {
		ev.Reasoning = *m.Reasoning
	}
	for i, tc := range m.ToolCalls {
		ev.ToolCalls = append(ev.ToolCalls, execution.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if ev.HasContent() {
		evs = append(evs, ev)
	}
	done := execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: ch.FinishReason}
	if ch.FinishReason == "stop" {
		done.StopSequence = ch.Sequence()
	}
	if c.Usage != nil {
		done.Usage = c.Usage.TokenUsage()
	}
	return append(evs, done), lost, true
}
