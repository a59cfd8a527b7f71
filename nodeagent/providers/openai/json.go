package openai

import (
	"encoding/json"
	"net/http"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/execution"
)

// maxJSONAnswer bounds a non-stream upstream answer.
const maxJSONAnswer = 64 << 20

// completion is what the reader decodes of a chat.completion.
type completion struct {
	answerID
	Choices []struct {
		Index   int `json:"index"`
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
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *eventstream.Usage `json:"usage"`
}

// emitCompletion turns the upstream's whole answer (a JSON body) into
// events: its identity, the message, then complete with its finish
// reason and usage.
func emitCompletion(b []byte, emit *execution.Emitter) error {
	var c completion
	if json.Unmarshal(b, &c) != nil || len(c.Choices) == 0 {
		return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "the upstream answer is not a chat completion"})
	}
	emit.Emit(c.start())
	ch := c.Choices[0]
	ev := execution.RunEvent{Type: execution.EventTypeDelta}
	if s := ch.Message.Content; s != nil {
		ev.Delta = *s
	}
	if s := ch.Message.ReasoningContent; s != nil {
		ev.Reasoning = *s
	} else if s := ch.Message.Reasoning; s != nil {
		ev.Reasoning = *s
	}
	for i, tc := range ch.Message.ToolCalls {
		ev.ToolCalls = append(ev.ToolCalls, execution.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if ev.HasContent() {
		emit.Emit(ev)
	}
	done := execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: ch.FinishReason}
	if c.Usage != nil {
		done.Usage = c.Usage.TokenUsage()
	}
	emit.Emit(done)
	return nil
}
