package execution

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestRegistryLookup(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(ProviderDescriptor{ProviderID: "a", Adapter: "sim", Target: "m"}, plainProvider{}); err != nil {
		t.Fatal(err)
	}
	if _, d, err := r.Lookup("a"); err != nil || d.Adapter != "sim" {
		t.Fatalf("Lookup(a) = %+v, %v", d, err)
	}
	_, _, err := r.Lookup("missing")
	var f *ExecutionFailure
	if !errors.Is(err, ErrProviderNotFound) || !errors.As(err, &f) || f.Code != FailureCodeProviderNotFound {
		t.Fatalf("Lookup(missing) error = %v, want provider_not_found", err)
	}
	r.SetAvailable("a", false)
	if _, _, err := r.Lookup("a"); !errors.Is(err, ErrProviderUnavailable) {
		t.Fatalf("Lookup(unavailable) error = %v, want provider_unavailable", err)
	}
	r.SetAvailable("a", true)
	if _, _, err := r.Lookup("a"); err != nil {
		t.Fatalf("Lookup after re-enable: %v", err)
	}
	if r.SetAvailable("missing", true) {
		t.Fatal("SetAvailable reported an unknown provider as existing")
	}
}

func TestRegistryRegisterRejects(t *testing.T) {
	r := NewRegistry()
	cases := []struct {
		name string
		d    ProviderDescriptor
		p    Provider
	}{
		{"empty id", ProviderDescriptor{}, plainProvider{}},
		{"nil provider", ProviderDescriptor{ProviderID: "x"}, nil},
		{"negative stall timeout", ProviderDescriptor{ProviderID: "y", ResponseStallTimeoutMS: -1}, plainProvider{}},
	}
	for _, c := range cases {
		if err := r.Register(c.d, c.p); err == nil {
			t.Errorf("%s: Register succeeded", c.name)
		}
	}
	if err := r.Register(ProviderDescriptor{ProviderID: "z"}, plainProvider{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(ProviderDescriptor{ProviderID: "z"}, plainProvider{}); err == nil {
		t.Fatal("duplicate Register succeeded")
	}
	if got := r.Descriptors(); len(got) != 1 || got[0].ProviderID != "z" {
		t.Fatalf("Descriptors = %+v", got)
	}
}

type lifecycleProvider struct {
	plainProvider
	mu             sync.Mutex
	starts, closes int
}

func (p *lifecycleProvider) Start(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	return nil
}

func (p *lifecycleProvider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closes++
	return nil
}

func TestRegistryLifecycle(t *testing.T) {
	r := NewRegistry()
	lp := &lifecycleProvider{}
	_ = r.Register(ProviderDescriptor{ProviderID: "l"}, lp)
	_ = r.Register(ProviderDescriptor{ProviderID: "p"}, plainProvider{})
	for range 2 {
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if lp.starts != 1 || lp.closes != 1 {
		t.Fatalf("starts=%d closes=%d, want 1 and 1", lp.starts, lp.closes)
	}
}

// lookupSpy records whether Lookup was reached.
type lookupSpy struct {
	calls    int
	provider Provider
}

func (s *lookupSpy) Lookup(id string) (Provider, ProviderDescriptor, error) {
	s.calls++
	if s.provider == nil {
		return nil, ProviderDescriptor{}, NewFailure(FailureCodeProviderNotFound, id)
	}
	return s.provider, ProviderDescriptor{ProviderID: id}, nil
}

type commandProvider struct {
	plainProvider
	got *CommandRequest
}

func (p *commandProvider) HandleCommand(_ context.Context, cmd *CommandRequest, emit *FrameEmitter) error {
	p.got = cmd
	emit.Emit(ProviderTunnelFrame{Type: FrameTypeEnd})
	return nil
}

func TestCommandAllowlistCheckedBeforeLookup(t *testing.T) {
	rejected := []string{"", "shell", "exec", "CAPABILITIES", "capabilities ", "ollama_api\x00", "transport-status"}
	for _, name := range rejected {
		spy := &lookupSpy{provider: &commandProvider{}}
		err := RunProviderCommand(context.Background(), spy, &CommandRequest{Command: ProviderCommand(name), ProviderID: "p"}, NewFrameEmitter(func(ProviderTunnelFrame) {}))
		if !errors.Is(err, ErrCommandNotAllowed) {
			t.Errorf("command %q: err = %v, want ErrCommandNotAllowed", name, err)
		}
		if spy.calls != 0 {
			t.Errorf("command %q reached provider lookup %d times", name, spy.calls)
		}
	}
	for _, c := range []ProviderCommand{CommandCapabilities, CommandTransportStatus, CommandOllamaAPI} {
		if err := CheckProviderCommand(string(c)); err != nil {
			t.Errorf("CheckProviderCommand(%q) = %v", c, err)
		}
	}
	if len(ProviderCommands) != 3 {
		t.Fatalf("allowlist has %d commands, want 3", len(ProviderCommands))
	}
}

func TestRunProviderCommandDispatches(t *testing.T) {
	cp := &commandProvider{}
	spy := &lookupSpy{provider: cp}
	var frames []ProviderTunnelFrame
	err := RunProviderCommand(context.Background(), spy, &CommandRequest{Command: CommandOllamaAPI, ProviderID: "p", Path: "/api/tags"},
		NewFrameEmitter(func(f ProviderTunnelFrame) { frames = append(frames, f) }))
	if err != nil || spy.calls != 1 || cp.got == nil || cp.got.Path != "/api/tags" || len(frames) != 1 {
		t.Fatalf("err=%v calls=%d got=%+v frames=%d", err, spy.calls, cp.got, len(frames))
	}
	spy = &lookupSpy{provider: plainProvider{}}
	err = RunProviderCommand(context.Background(), spy, &CommandRequest{Command: CommandOllamaAPI, ProviderID: "p"}, NewFrameEmitter(func(ProviderTunnelFrame) {}))
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("provider without CommandHandler: err = %v, want ErrUnsupported", err)
	}
	spy = &lookupSpy{}
	err = RunProviderCommand(context.Background(), spy, &CommandRequest{Command: CommandOllamaAPI, ProviderID: "gone"}, NewFrameEmitter(func(ProviderTunnelFrame) {}))
	if !errors.Is(err, ErrProviderNotFound) {
		t.Fatalf("missing provider: err = %v", err)
	}
}

func TestValidateRunID(t *testing.T) {
	if err := ValidateRunID(""); !errors.Is(err, ErrEmptyRunID) {
		t.Fatalf("ValidateRunID(\"\") = %v", err)
	}
	if err := ValidateRunID("run-1"); err != nil {
		t.Fatalf("ValidateRunID(run-1) = %v", err)
	}
}
