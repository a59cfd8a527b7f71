package openai

import "encoding/json"

// StopNamed is what an OpenAI-compatible server says of the stop that
// ended a choice beyond its finish_reason, read from the choice's own
// fields: vLLM's stop_reason and SGLang's matched_stop, each the matched
// stop string, a stop token's id, or null. OpenAI reports neither: a
// stop sequence and a natural end both read "stop" there.
type StopNamed struct {
	StopReason  json.RawMessage `json:"stop_reason"`
	MatchedStop json.RawMessage `json:"matched_stop"`
}

// Sequence is the stop string that ended the choice, when the server
// named one: "" for a token id, null, or a server that says nothing.
func (s StopNamed) Sequence() string {
	for _, raw := range [...]json.RawMessage{s.StopReason, s.MatchedStop} {
		var seq string
		if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &seq) == nil && seq != "" {
			return seq
		}
	}
	return ""
}
