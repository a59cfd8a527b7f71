package e2e

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"

	"github.com/iopgw/iop/internal/testing/logbuf"
)

// TestDeadUpstreamIsDiagnosed: a provider whose upstream refuses
// connections shows a probe that did not confirm it (unknown: no answer)
// before any request; a request
// gets 502 upstream_unavailable naming the cause (never the address); the
// node logs the failure with its cause class.
func TestDeadUpstreamIsDiagnosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	logs := &logbuf.Buffer{}
	c := Start(t, Options{Log: slog.New(slog.NewJSONHandler(logs, nil)), Gateway: func(g *gateway.Config) {
		g.Retry.Retries = new(int) // one attempt: the failure itself reaches the client
	}}, func(*Cluster) []NodeSpec {
		p := nodeagent.ProviderConfig{ID: "dead", Adapter: "openai", Path: nodeagent.PathNormalized, BaseURL: "http://" + dead + "/v1",
			Models: []string{"m"}, Capacity: 2}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{p}}}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		snap := c.Gateway.Pool().Snapshot()
		if len(snap) == 1 && snap[0].Probe != "" && snap[0].Probe != "available" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connect probe evidence in the status: %+v", snap)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp := post(t, c.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	body := readAll(t, resp)
	if resp.StatusCode != 502 || !strings.Contains(body, `"code":"upstream_unavailable"`) || !strings.Contains(body, "connection refused") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	_, port, _ := net.SplitHostPort(dead)
	if strings.Contains(body, port) || strings.Contains(body, "127.0.0.1") {
		t.Fatalf("the client learned the upstream's address: %s", body)
	}
	found := false
	for _, r := range logs.Records("upstream failed") {
		if r["cause"] == "refused" && r["provider_id"] == "dead" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no node log of the upstream failure with its cause:\n%s", logs.String())
	}
	if len(logs.Records("provider probe at connect: its upstream does not answer as expected")) == 0 {
		t.Fatal("no edge log of the failed connect probe")
	}
}
