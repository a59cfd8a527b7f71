package ollama

import (
	"encoding/json"
	"slices"
)

// What an Ollama-native upstream does with each Chat Completions field
// when an OpenAI client's request is translated for it.
var (
	// chatMapped are carried (by the node's Ollama provider).
	chatMapped = []string{"model", "messages", "stream", "stream_options", "temperature", "top_p", "max_tokens", "max_completion_tokens",
		"seed", "stop", "tools", "tool_choice", "response_format", "frequency_penalty", "presence_penalty", "top_k", "min_p",
		"repetition_penalty", "reasoning_effort", "n", "modalities", "logprobs"}
	// chatNotApplicable describe the request to OpenAI's own service
	// (billing, storage, caching, routing) and do not change an answer;
	// Ollama has nothing to apply them to.
	chatNotApplicable = []string{"user", "metadata", "store", "service_tier", "safety_identifier", "prompt_cache_key",
		"prompt_cache_options", "prompt_cache_retention", "parallel_tool_calls", "moderation"}
)

// ChatRefusal names the first field of a Chat Completions body an
// Ollama-native upstream cannot honour ("" when there is none): one that
// would change the answer but has no Ollama equivalent (logit_bias,
// top_logprobs, audio output, predicted outputs, web search, verbosity,
// a forced tool_choice, n > 1, unknown fields).
func ChatRefusal(chatBody []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(chatBody, &m) != nil {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := m[k]
		if string(v) == "null" || slices.Contains(chatNotApplicable, k) {
			continue
		}
		if !slices.Contains(chatMapped, k) {
			return k
		}
		switch k {
		case "tool_choice":
			if string(v) != `"auto"` {
				return k
			}
		case "n":
			if string(v) != "1" {
				return k
			}
		case "modalities":
			if string(v) != `["text"]` {
				return k
			}
		case "logprobs":
			if string(v) == "true" {
				return k
			}
		}
	}
	return ""
}

// ChatOptions returns the Ollama options and think setting a Chat body
// asks for beyond the neutral parameters: penalties, top_k, min_p,
// repetition_penalty (Ollama's repeat_penalty) and reasoning_effort
// (think). Nil values mean unset.
func ChatOptions(chatBody []byte) (opts map[string]json.RawMessage, think json.RawMessage) {
	var m map[string]json.RawMessage
	if json.Unmarshal(chatBody, &m) != nil {
		return nil, nil
	}
	names := map[string]string{"frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty", "top_k": "top_k",
		"min_p": "min_p", "repetition_penalty": "repeat_penalty"}
	for from, to := range names {
		if v, ok := m[from]; ok && string(v) != "null" {
			if opts == nil {
				opts = map[string]json.RawMessage{}
			}
			opts[to] = v
		}
	}
	switch v := string(m["reasoning_effort"]); v {
	case `"low"`, `"medium"`, `"high"`:
		think = m["reasoning_effort"]
	case `"none"`, `"minimal"`:
		think = json.RawMessage("false")
	}
	return opts, think
}
