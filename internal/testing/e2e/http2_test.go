package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"
)

// tlsSimCluster starts an edge serving its public API over TLS (so
// HTTP/2) with one sim node; it returns the CA that signed the edge.
func tlsSimCluster(t *testing.T) (*Cluster, *testCA) {
	t.Helper()
	dir := t.TempDir()
	ca := newCA(t, dir, "iop-ca")
	cert, key := ca.issue(t, dir, "edge", true)
	c := Start(t, Options{Gateway: func(g *gateway.Config) { g.TLS = gateway.TLSConfig{CertFile: cert, KeyFile: key} }},
		func(c *Cluster) []NodeSpec {
			return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{})}}}
		})
	return c, ca
}

// TestHTTP2RapidReset is RELIABILITY.md R25: over TLS with HTTP/2, one
// connection opens and immediately resets streams as fast as it can for
// 2 s (the CVE-2023-44487 pattern). Goroutines stay under baseline + the
// 250-stream bound, and a legitimate request on another connection keeps
// completing in under a second.
func TestHTTP2RapidReset(t *testing.T) {
	c, ca := tlsSimCluster(t)
	addr := strings.TrimPrefix(c.URL, "http://")
	pem, _ := os.ReadFile(ca.file)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tlsCfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2"}}
	legit := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone(), ForceAttemptHTTP2: true}}
	ask := func() time.Duration {
		t0 := time.Now()
		resp, err := legit.Post("https://"+addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("legitimate request: %d over HTTP/%d", resp.StatusCode, resp.ProtoMajor)
		}
		return time.Since(t0)
	}
	ask()
	base := runtime.NumGoroutine()

	conn, err := tls.Dial("tcp", addr, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	_ = fr.WriteSettings()
	go func() { // drain the server's frames
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", addr}, {":path", "/v1/chat/completions"}, {"content-type", "application/json"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := hb.Bytes()
	stop := time.Now().Add(2 * time.Second)
	sent, peak, worst := 0, 0, time.Duration(0)
	for id := uint32(1); time.Now().Before(stop); id += 2 {
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}) != nil ||
			fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break // the server gave up on this connection: also a pass
		}
		sent++
		if sent%2000 == 0 {
			peak = max(peak, runtime.NumGoroutine()-base)
			worst = max(worst, ask())
		}
	}
	peak = max(peak, runtime.NumGoroutine()-base)
	worst = max(worst, ask())
	t.Logf("%d HEADERS+RST_STREAM pairs; goroutines peaked at baseline+%d; slowest legitimate request %v", sent, peak, worst)
	if peak > 250+50 {
		t.Fatalf("goroutines rose by %d under rapid reset", peak)
	}
	if worst > time.Second {
		t.Fatalf("a legitimate request took %v under rapid reset", worst)
	}
}
