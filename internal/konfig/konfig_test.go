package konfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type testConf struct {
	NodeID  string        `koanf:"node_id"`
	Timeout time.Duration `koanf:"timeout"`
	Metrics struct {
		Listen string `koanf:"listen"`
	} `koanf:"metrics"`
	Items []struct {
		Name string `koanf:"name"`
		N    int    `koanf:"n"`
	} `koanf:"items"`
}

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFileThenEnv(t *testing.T) {
	p := write(t, "node_id: a\ntimeout: 3s\nmetrics:\n  listen: 127.0.0.1:1\nitems:\n  - name: x\n    n: 2\n")
	t.Setenv("IOP_METRICS__LISTEN", "127.0.0.1:2")
	var c testConf
	c.NodeID = "default"
	if err := Load(p, &c); err != nil {
		t.Fatal(err)
	}
	if c.NodeID != "a" || c.Timeout != 3*time.Second || c.Metrics.Listen != "127.0.0.1:2" || len(c.Items) != 1 || c.Items[0].N != 2 {
		t.Fatalf("loaded %+v", c)
	}
}

func TestLoadKeepsDefaults(t *testing.T) {
	var c testConf
	c.NodeID = "default"
	if err := Load(write(t, "timeout: 1s\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.NodeID != "default" {
		t.Fatalf("default lost: %q", c.NodeID)
	}
}

func TestLoadRejectsUnknownKeyNamingFileAndKey(t *testing.T) {
	p := write(t, "node_id: a\nnode_idd: b\n")
	var c testConf
	err := Load(p, &c)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "node_idd") {
		t.Fatalf("err = %v, want it to name %s and node_idd", err, p)
	}
}

func TestLoadRejectsWrongType(t *testing.T) {
	var c testConf
	err := Load(write(t, "timeout: soon\n"), &c)
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("err = %v, want it to name timeout", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	var c testConf
	if err := Load("/nonexistent/x.yaml", &c); err == nil || !strings.Contains(err.Error(), "/nonexistent/x.yaml") {
		t.Fatalf("err = %v", err)
	}
}

func TestEnvKey(t *testing.T) {
	for in, want := range map[string]string{"IOP_NODE_ID": "node_id", "IOP_METRICS__LISTEN": "metrics.listen", "IOP_A__B__C_D": "a.b.c_d"} {
		if got := EnvKey(in); got != want {
			t.Errorf("EnvKey(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestExpandEnv(t *testing.T) {
	t.Setenv("KONFIG_TEST_SECRET", "s3cret")
	p := write(t, "node_id: ${KONFIG_TEST_SECRET}\nmetrics:\n  listen: \"$keep ${KONFIG_TEST_UNSET}x\"\n")
	var c testConf
	if err := Load(p, &c); err != nil {
		t.Fatal(err)
	}
	if c.NodeID != "s3cret" || c.Metrics.Listen != "$keep x" {
		t.Fatalf("%+v", c)
	}
}

// TestUnrelatedEnvironmentIsIgnored: an IOP_ variable that names no key
// (IOP_BIN from a build script, say) is ignored; one that does is read.
func TestUnrelatedEnvironmentIsIgnored(t *testing.T) {
	type cfg struct {
		Listen string `koanf:"listen"`
		Log    struct {
			Level string `koanf:"level"`
		} `koanf:"log"`
		Headers map[string]string `koanf:"headers"`
	}
	t.Setenv("IOP_BIN", "/usr/local/bin/iop")
	t.Setenv("IOP_LOG__LEVEL", "debug")
	t.Setenv("IOP_LISTEN", "0.0.0.0:9")
	t.Setenv("IOP_HEADERS__X_TEAM", "a")
	var c cfg
	if err := Load("", &c); err != nil {
		t.Fatal(err)
	}
	if c.Log.Level != "debug" || c.Listen != "0.0.0.0:9" || c.Headers["x_team"] != "a" {
		t.Fatalf("loaded %+v", c)
	}
}
