package execution

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ProviderCommand names a provider command.
type ProviderCommand string

// The closed provider-command allowlist.
const (
	CommandCapabilities    ProviderCommand = "capabilities"
	CommandTransportStatus ProviderCommand = "transport_status"
	CommandOllamaAPI       ProviderCommand = "ollama_api"
)

// ProviderCommands lists the allowlist.
var ProviderCommands = []ProviderCommand{CommandCapabilities, CommandTransportStatus, CommandOllamaAPI}

// CheckProviderCommand returns nil for an allowlisted command and a
// command_not_allowed failure (errors.Is ErrCommandNotAllowed) otherwise.
// Callers run it before any provider lookup.
func CheckProviderCommand(name string) error {
	for _, c := range ProviderCommands {
		if string(c) == name {
			return nil
		}
	}
	return NewFailure(FailureCodeCommandNotAllowed, fmt.Sprintf("command %q is not allowed", printableName(name)))
}

// printableName bounds and sanitizes a caller-supplied name for messages.
func printableName(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// CommandRequest is one provider command.
type CommandRequest struct {
	Command    ProviderCommand
	ProviderID string
	// AdapterKey and Target name the exact target for capabilities.
	AdapterKey string
	Target     string
	// Method, Path and Body are the native request for ollama_api.
	Method string
	Path   string
	Body   []byte
	// RunID and AttemptID identify an ollama_api request for cancellation
	// and stall metadata.
	RunID     string
	AttemptID string
}

// CapabilitiesResult is the stable evidence of a capabilities command: the
// requested adapter instance key, the exact target, the fail-closed
// normalized provider status, and the next health_observation_seq of the
// transport session (0 on unbound paths, where it is omitted).
type CapabilitiesResult struct {
	AdapterKey           string
	Target               string
	ProviderStatus       HealthStatus
	HealthObservationSeq uint64
}

// ValidateRunID returns ErrEmptyRunID for an empty run_id: cancellation
// targets a non-empty run_id only.
func ValidateRunID(runID string) error {
	if runID == "" {
		return ErrEmptyRunID
	}
	return nil
}

// RunProviderCommand checks cmd against the allowlist before looking the
// provider up, then hands it to the provider's CommandHandler. It serves
// commands that providers answer themselves; hosts answer capabilities and
// transport_status from their own state after the same check.
func RunProviderCommand(ctx context.Context, lookup ProviderLookup, cmd *CommandRequest, emit *FrameEmitter) error {
	if err := CheckProviderCommand(string(cmd.Command)); err != nil {
		return err
	}
	p, _, err := lookup.Lookup(cmd.ProviderID)
	if err != nil {
		return err
	}
	h, ok := p.(CommandHandler)
	if !ok {
		return NewFailure(FailureCodeUnsupported, fmt.Sprintf("provider %q does not handle %s", cmd.ProviderID, cmd.Command))
	}
	return h.HandleCommand(ctx, cmd, emit)
}
