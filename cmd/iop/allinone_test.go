package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/iopgw/iop/internal/testing/wait"
)

// TestGatewayAllInOne runs `iop gateway` with a node: section as a
// process: the bundled node serves through the in-process link with no
// nodes: list; a reload that changes the keys keeps it serving (the
// bundled node is never "removed"); a change of the node section is
// reported as needing a restart; SIGTERM ends both cleanly.
func TestGatewayAllInOne(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := "listen: 127.0.0.1:0\nnode_listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n"
	node := "node:\n  providers:\n    - {id: sim, adapter: sim, models: [iop-sim], capacity: 4}\n"
	write(base + node + "auth: {keys: [{id: a, sha256: " + hashHex("key-a") + "}]}\n")
	cmd, logs, api, admin := startGatewayProcess(t, path)
	chat := func(key string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, api+"/v1/chat/completions",
			strings.NewReader(`{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The in-process node may connect before or after the edge logs that
	// it listens: wait for its providers.
	var code int
	var body string
	wait.Until(t, func() bool { code, body = chat("key-a"); return code == http.StatusOK })
	if !strings.Contains(body, "You said: hi") {
		t.Fatalf("the bundled node's answer: %d %s", code, body)
	}
	write(base + node + "auth: {keys: [{id: b, sha256: " + hashHex("key-b") + "}]}\n")
	_ = cmd.Process.Signal(syscall.SIGHUP)
	logs.wait(t, "configuration reloaded")
	if code, body := chat("key-b"); code != http.StatusOK {
		t.Fatalf("after a reload the bundled node must still serve: %d %s", code, body)
	}
	write(base + strings.Replace(node, "capacity: 4", "capacity: 8", 1) + "auth: {keys: [{id: b, sha256: " + hashHex("key-b") + "}]}\n")
	_ = cmd.Process.Signal(syscall.SIGHUP)
	partial := logs.wait(t, "configuration reloaded in part")
	if !strings.Contains(partial["error"].(string), "node") {
		t.Fatalf("a changed node section must ask for a restart: %v", partial)
	}
	resp, err := http.Get(admin + "/admin/providers")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"provider_id": "local/sim"`) {
		t.Fatalf("providers:\n%s", b)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}
