package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// proc is a child process under measurement.
type proc struct {
	cmd  *exec.Cmd
	name string
}

func start(ctx context.Context, name string, dir string, env []string, args ...string) (*proc, io.Reader, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return &proc{cmd: cmd, name: name}, out, nil
}

// startAddr starts a child that prints its listen address first.
func startAddr(ctx context.Context, name string, args ...string) (*proc, string, error) {
	p, out, err := start(ctx, name, "", nil, args...)
	if err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		p.stop()
		return nil, "", fmt.Errorf("%s: no address: %w", name, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return p, strings.TrimSpace(line), nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// cpuTime is a process's CPU time: the sum of its threads' time on a
// CPU, in nanoseconds (/proc/<pid>/task/<tid>/schedstat), or where that
// cannot be read its user+system time from /proc/<pid>/stat, which
// counts in 10 ms ticks — too coarse for a run of a few thousand chunks
// (one tick is 5 µs a chunk over 2,048). A thread that ends takes its
// time with it from the sum; the systems measured keep theirs (Go's
// runtime and Node's pools do not end threads under load).
func cpuTime(pid int) time.Duration {
	if d, ok := threadsTime(pid); ok {
		return d
	}
	return statTime(pid)
}

// statTime is a process's user+system time from /proc/<pid>/stat.
func statTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ = 100
}

// threadsTime sums the time on a CPU of pid's threads.
func threadsTime(pid int) (time.Duration, bool) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread ended while the directory was read
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += time.Duration(ns)
	}
	return sum, true
}

// memKB reads VmRSS and VmHWM (peak) of a process, in KiB.
func memKB(pid int) (rss, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			peak = v
		}
	}
	return rss, peak
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHTTP polls url until it answers 200.
func waitHTTP(ctx context.Context, url string, headers map[string]string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && (!strings.HasSuffix(url, "/v1/models") || strings.Contains(string(b), "bench-n")) {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s never became ready", url)
}

func writeFile(dir, name, body string) string {
	p := filepath.Join(dir, name)
	_ = os.WriteFile(p, []byte(body), 0o600)
	return p
}
