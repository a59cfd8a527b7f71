package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/iopgw/iop/gateway"
)

func hashHex(s string) string { return gateway.HashToken(s) }

// TestMain lets a test run this binary as `iop` (IOP_TEST_MAIN=1): the
// reload tests signal a real process. Otherwise the tests run and no
// goroutine may outlive them (goleak).
func TestMain(m *testing.M) {
	if os.Getenv("IOP_TEST_MAIN") == "1" {
		ctx, stop := signalContext()
		err := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		if err != nil {
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// logTail follows a child's JSON log lines.
type logTail struct{ lines chan map[string]any }

func tailLog(r io.Reader) *logTail {
	lt := &logTail{lines: make(chan map[string]any, 256)}
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			var m map[string]any
			if json.Unmarshal(s.Bytes(), &m) == nil {
				lt.lines <- m
			}
		}
		close(lt.lines)
	}()
	return lt
}

// wait returns the first line with msg, failing after 10 s.
func (lt *logTail) wait(t *testing.T, msg string) map[string]any {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-lt.lines:
			if !ok {
				t.Fatalf("the process exited before logging %q", msg)
			}
			if m["msg"] == msg {
				return m
			}
		case <-timeout:
			t.Fatalf("no %q logged", msg)
		}
	}
}

// startGatewayProcess runs `iop gateway --config path` as a child
// process, killed at the test's end, and waits for it to listen.
func startGatewayProcess(t *testing.T, path string) (cmd *exec.Cmd, logs *logTail, api, admin string) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "gateway", "--config", path)
	cmd.Env = append(os.Environ(), "IOP_TEST_MAIN=1")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	logs = tailLog(stderr)
	up := logs.wait(t, "edge listening")
	return cmd, logs, "http://" + up["http"].(string), "http://" + up["admin"].(string)
}

// TestGatewaySIGHUP runs `iop gateway` as a process: SIGHUP re-reads the
// file (a client key added applies; the process lives on), an invalid
// file is rejected and the old configuration keeps running, and the
// configuration generation shows on /metrics.
func TestGatewaySIGHUP(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := "listen: 127.0.0.1:0\nnode_listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nnodes: [{id: n, token: t}]\n"
	write(base + "auth: {keys: [{id: a, sha256: " + hashHex("key-a") + "}]}\n")
	cmd, logs, api, admin := startGatewayProcess(t, path)
	status := func(key string) int {
		req, _ := http.NewRequest(http.MethodGet, api+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status("key-b") != http.StatusUnauthorized || status("key-a") != http.StatusOK {
		t.Fatal("keys before the reload")
	}
	write(base + "auth: {keys: [{id: b, sha256: " + hashHex("key-b") + "}]}\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.wait(t, "configuration reloaded")
	if status("key-b") != http.StatusOK || status("key-a") != http.StatusUnauthorized {
		t.Fatal("keys after the reload: the added key must pass and the removed one be refused")
	}
	write(base + "models: [{name: x, fallbacks: [x]}]\n")
	_ = cmd.Process.Signal(syscall.SIGHUP)
	rejected := logs.wait(t, "configuration reload rejected; still running the previous configuration")
	if !strings.Contains(rejected["error"].(string), "models[0].fallbacks[0]") {
		t.Fatalf("rejection %v", rejected)
	}
	if status("key-b") != http.StatusOK {
		t.Fatal("an invalid reload changed the running configuration")
	}
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "iop_edge_config_generation 2") || !strings.Contains(string(b), `iop_edge_config_reloads_total{result="rejected"} 1`) {
		t.Fatalf("metrics lack the generation or the rejected reload:\n%s", grepLines(string(b), "iop_edge_config"))
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
