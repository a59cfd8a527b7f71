package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfileBuild builds the binary exactly as the Dockerfile does
// (there is no Docker engine here) and checks that it is static, runs as
// the image's entry point, and that the image is non-root.
func TestDockerfileBuild(t *testing.T) {
	df, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`ENTRYPOINT ["iop"]`, "USER nonroot", "FROM gcr.io/distroless/static"} {
		if !strings.Contains(string(df), want) {
			t.Fatalf("Dockerfile lacks %q", want)
		}
	}
	m := regexp.MustCompile(`RUN CGO_ENABLED=0 go build (.*) -o /out/iop (\./cmd/iop)`).FindStringSubmatch(string(df))
	if m == nil {
		t.Fatal("no go build line in the Dockerfile")
	}
	out := filepath.Join(t.TempDir(), "iop")
	flags := strings.ReplaceAll(m[1], "${VERSION}", "test")
	args := append([]string{"build"}, splitFlags(flags)...)
	args = append(args, "-o", out, m[2])
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatal("the binary is dynamically linked")
		}
	}
	v, err := exec.Command(out, "version").Output()
	if err != nil || !strings.HasPrefix(string(v), "iop test ") {
		t.Fatalf("version: %q %v", v, err)
	}
}

// splitFlags splits the build flags, keeping the quoted -ldflags value.
func splitFlags(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`"[^"]*"|\S+`).FindAllString(s, -1) {
		out = append(out, strings.Trim(m, `"`))
	}
	return out
}
