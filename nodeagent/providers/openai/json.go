package openai

import "github.com/iopgw/iop/execution"

// maxJSONAnswer bounds a non-stream upstream answer.
const maxJSONAnswer = 64 << 20

// emitCompletion emits the events of the upstream's whole answer
// (openai.CompletionEvents): its identity, the message, then complete
// with its finish reason and usage.
func emitCompletion(evs []execution.RunEvent, emit *execution.Emitter) {
	evs[0].Model = "" // the answer names the model as the client did, as a stream's does
	for _, ev := range evs {
		emit.Emit(ev)
	}
}
