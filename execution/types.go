package execution

import (
	"context"
	"encoding/json"
)

// Provider is the narrow interface every provider implements: run one
// normalized attempt and report its events, in order, to emit.
//
// Execute blocks until the attempt ends. It must stop promptly when ctx is
// cancelled. The emitter it is handed publishes exactly one terminal event;
// a provider should end with EventTypeComplete, EventTypeError or
// EventTypeCancelled, and anything emitted after that is dropped. A non-nil
// error returned without a terminal event is turned into an error terminal
// by the host.
type Provider interface {
	Execute(ctx context.Context, req *RunRequest, emit *Emitter) error
}

// Lifecycle is implemented by providers that hold resources between runs.
// The registry calls Start once before the first run and Close once on
// shutdown.
type Lifecycle interface {
	Start(ctx context.Context) error
	Close() error
}

// Tunneler is implemented by providers that can carry an OpenAI-compatible
// HTTP exchange unchanged (the tunnel path). Frames go to emit in order:
// response_start, body chunks, optional usage, then end or error.
type Tunneler interface {
	Tunnel(ctx context.Context, req *ProviderTunnelRequest, emit *FrameEmitter) error
}

// CommandHandler is implemented by providers that answer provider commands
// themselves (today: ollama_api). Hosts check the allowlist with
// [CheckProviderCommand] before looking the provider up.
type CommandHandler interface {
	HandleCommand(ctx context.Context, cmd *CommandRequest, emit *FrameEmitter) error
}

// RunRequest is one normalized attempt sent to a provider.
type RunRequest struct {
	RunID     string // required; the only cancellation target
	AttemptID string // unique per attempt of a run
	SessionID string // opaque correlation value; never selects anything

	ProviderID string // provider identity in the registry
	Model      string // the exact target served by the provider

	// Messages are the neutral messages; nil for a run whose ChatBody
	// carries them (a provider that needs them parses them from it).
	Messages []Message
	Params   GenerationParams

	// ChatBody is the request as an OpenAI Chat Completions body: the
	// client's own, or a lossless translation of a Responses or Ollama
	// request. OpenAI-family providers send it upstream with only the
	// model and streaming fields set, so fields the runtime does not model
	// pass unchanged; providers of other families map what they can from
	// it. Nil from a sender that predates it.
	ChatBody []byte
	// Header holds client request headers forwarded upstream (trace
	// context, request id, OpenAI-Beta, Idempotency-Key); never
	// credentials.
	Header map[string][]string
	// Stream reports whether the client asked for a stream.
	Stream bool
	// Continuation marks a resumed stream: the last message is the
	// assistant text the client already has, which the answer continues
	// (the provider applies its prefill settings).
	Continuation bool

	// ResponseStallTimeoutMS is the provider's effective stall timeout.
	// Zero on the wire means the node applies DefaultResponseStallTimeoutMS.
	ResponseStallTimeoutMS int64
}

// Message is one chat message in provider-neutral form.
type Message struct {
	Role       string     // system, user, assistant, tool
	Content    string     // text content
	Images     []string   // base64-encoded images, when the client sent them
	Name       string     // optional participant name
	ToolCallID string     // for role tool: the call answered
	ToolCalls  []ToolCall // for role assistant: calls it made
}

// ToolCall is a complete function call made by the assistant.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text
}

// ToolCallDelta is a fragment of a streamed function call; fragments with
// the same Index concatenate.
type ToolCallDelta struct {
	Index     int
	ID        string // first fragment only
	Name      string // first fragment only
	Arguments string // argument text fragment
}

// GenerationParams are the sampling parameters a provider may honour. Nil
// pointers mean "not set by the client".
type GenerationParams struct {
	Temperature *float64
	TopP        *float64
	MaxTokens   *int64
	Seed        *int64
	Stop        []string
	// Tools is the client's tool list in OpenAI function-tool JSON.
	Tools json.RawMessage
	// ToolChoice is the client's tool_choice JSON, if any.
	ToolChoice json.RawMessage
	// ResponseFormat is the client's response_format JSON, if any.
	ResponseFormat json.RawMessage
}

// EventType names a runtime event.
type EventType string

// The runtime event types. Complete, error and cancelled are terminal.
const (
	EventTypeStart     EventType = "start"
	EventTypeDelta     EventType = "delta"
	EventTypeMessage   EventType = "message"
	EventTypeUsage     EventType = "usage"
	EventTypeComplete  EventType = "complete"
	EventTypeError     EventType = "error"
	EventTypeCancelled EventType = "cancelled"
)

// IsTerminal reports whether t ends an execution.
func (t EventType) IsTerminal() bool {
	return t == EventTypeComplete || t == EventTypeError || t == EventTypeCancelled
}

// RunEvent is one event of a normalized execution.
type RunEvent struct {
	Type EventType

	Model string // start: the model that answers
	// start: the upstream's identity of the answer, when it reported one
	// (renderers whose format has the field keep it).
	ResponseID        string
	Created           int64
	SystemFingerprint string
	ServiceTier       string

	Delta     string          // delta: assistant text fragment
	Reasoning string          // delta: reasoning text fragment
	ToolCalls []ToolCallDelta // delta: tool-call fragments
	Message   string          // message: a whole assistant message

	Usage        *TokenUsage // observation data; on usage or terminal events
	FinishReason string      // complete: stop, length, tool_calls, content_filter
	// StopSequence is, on a complete event finished by "stop", the stop
	// sequence that ended the answer when the upstream named it (vLLM's
	// stop_reason, SGLang's matched_stop); renderers whose format reports
	// it (Anthropic's stop_sequence) show it only if the request asked
	// for that sequence.
	StopSequence string

	// Error is the legacy human-readable error string of an error event.
	Error string
	// Failure is the typed failure of an error event, if known.
	Failure *ExecutionFailure
}

// HasContent reports whether a delta or message event carries output.
func (e *RunEvent) HasContent() bool {
	return e.Delta != "" || e.Reasoning != "" || len(e.ToolCalls) > 0 || e.Message != ""
}

// TokenUsage is observation data reported by a provider. It is attached to
// execution or tunnel results and never drives control flow.
type TokenUsage struct {
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
	CachedTokens     int64
	ReasoningTokens  int64
}

// ProviderTunnelRequest is an OpenAI-compatible HTTP request carried to a
// provider unchanged (the tunnel path).
type ProviderTunnelRequest struct {
	RunID      string
	AttemptID  string
	SessionID  string
	ProviderID string
	Model      string // the target the request names

	Method string
	Path   string // e.g. /v1/chat/completions, with the raw query if any
	Header map[string][]string
	Body   []byte

	// ResponseStallTimeoutMS has the same meaning as on RunRequest.
	ResponseStallTimeoutMS int64
}

// FrameType names a tunnel frame.
type FrameType string

// The tunnel frame types. End and error are terminal.
const (
	FrameTypeResponseStart FrameType = "response_start"
	FrameTypeBody          FrameType = "body"
	FrameTypeUsage         FrameType = "usage"
	FrameTypeEnd           FrameType = "end"
	FrameTypeError         FrameType = "error"
)

// IsTerminal reports whether t ends a tunnel.
func (t FrameType) IsTerminal() bool { return t == FrameTypeEnd || t == FrameTypeError }

// ProviderTunnelFrame is one frame of a tunnelled HTTP response.
type ProviderTunnelFrame struct {
	Type FrameType

	Status int                 // response_start
	Header map[string][]string // response_start; may be empty
	Body   []byte              // body
	Usage  *TokenUsage         // usage

	// Error is the legacy human-readable error string of an error frame.
	Error string
	// Failure is the typed failure of an error frame, if known.
	Failure *ExecutionFailure
}
