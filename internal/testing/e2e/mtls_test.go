package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/nodeagent"
)

// testCA issues certificates for the mTLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, name+".pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue writes a leaf certificate and key for cn (also a DNS SAN) and
// returns their paths.
func (ca *testCA) issue(t *testing.T, dir, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, cn+"-"+ca.cert.Subject.CommonName+".crt"), filepath.Join(dir, cn+"-"+ca.cert.Subject.CommonName+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	kb, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, keyFile, "EC PRIVATE KEY", kb)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestNodeMTLS is RELIABILITY.md S3's certificate rows: with mTLS on the
// node link, a node with its own certificate connects; a node presenting
// another node's certificate (impersonation), a certificate from another
// CA, or no certificate is refused; and a node refuses an edge whose
// certificate does not chain to its pinned CA.
func TestNodeMTLS(t *testing.T) {
	dir := t.TempDir()
	ca, rogue := newCA(t, dir, "iop-ca"), newCA(t, dir, "rogue-ca")
	edgeCert, edgeKey := ca.issue(t, dir, "edge", true)
	aCert, aKey := ca.issue(t, dir, "node-a", false)
	rogueCert, rogueKey := rogue.issue(t, dir, "node-c", false)
	tlsTo := func(caFile, cert, key string) func(*nodeagent.Config) {
		return func(n *nodeagent.Config) {
			n.Edges[0].TLS = nodeagent.TLSConfig{Enabled: true, CAFile: caFile, CertFile: cert, KeyFile: key}
		}
	}
	sim := []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{})}
	c := Start(t, Options{TCPNodeLink: true, Gateway: func(g *gateway.Config) {
		g.NodeTLS = gateway.NodeTLSConfig{CertFile: edgeCert, KeyFile: edgeKey, ClientCAFile: ca.file}
		for _, id := range []string{"node-b", "node-c", "node-d", "node-e"} {
			g.Nodes = append(g.Nodes, fleet.NodeConfig{ID: id, Token: "token-" + id})
		}
	}}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "node-a", Providers: sim, Configure: tlsTo(ca.file, aCert, aKey)}}
	})
	// node-b holds a valid token of its own but presents node-a's
	// certificate; node-c's certificate is from another CA; node-d has none;
	// node-e pins the rogue CA, so it must refuse the real edge.
	c.StartNode(t, NodeSpec{ID: "node-b", Providers: sim, Configure: tlsTo(ca.file, aCert, aKey)})
	c.StartNode(t, NodeSpec{ID: "node-c", Providers: sim, Configure: tlsTo(ca.file, rogueCert, rogueKey)})
	c.StartNode(t, NodeSpec{ID: "node-d", Providers: sim, Configure: tlsTo(ca.file, "", "")})
	c.StartNode(t, NodeSpec{ID: "node-e", Providers: sim, Configure: tlsTo(rogue.file, aCert, aKey)})
	time.Sleep(1500 * time.Millisecond) // several connection attempts each
	nodes := c.Gateway.Hub().Nodes()
	if len(nodes) != 1 || nodes[0].NodeID != "node-a" {
		t.Fatalf("registered nodes %+v; want only node-a", nodes)
	}
	for _, s := range c.Gateway.Pool().Snapshot() {
		if s.NodeID != "node-a" {
			t.Fatalf("provider of %s in the pool", s.NodeID)
		}
	}
	if r := streamChat(t, c.URL, "iop-sim"); r.done != 1 {
		t.Fatalf("a request over the mTLS link failed: %+v", r)
	}
}
