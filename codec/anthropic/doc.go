// Package anthropic is the Anthropic Messages API's wire shapes as iop
// needs them: the error shape (a body and the SSE error event), the
// request's head and its neutral form, the model list's pages, and the
// rendering of a run's events as a Messages answer (JSON, or the SSE
// event sequence message_start, content_block_start/delta/stop,
// message_delta, message_stop) — what the built-in sim serves natively.
package anthropic
