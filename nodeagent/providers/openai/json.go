package openai

import (
	"net/http"

	oaicodec "github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// maxJSONAnswer bounds a non-stream upstream answer.
const maxJSONAnswer = 64 << 20

// emitCompletion turns the upstream's whole answer (a JSON body) into
// events: its identity, the message, then complete with its finish
// reason and usage.
func emitCompletion(b []byte, emit *execution.Emitter) error {
	evs, _, ok := oaicodec.CompletionEvents(b)
	if !ok {
		return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "the upstream answer is not a chat completion"})
	}
	evs[0].Model = "" // the answer names the model as the client did, as a stream's does
	for _, ev := range evs {
		emit.Emit(ev)
	}
	return nil
}
