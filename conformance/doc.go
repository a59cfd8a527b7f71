// Package conformance runs the official clients — openai-go, go-openai, the
// npm openai package (v6 on Node 20, v7 on Node 22), the npm ollama package
// and curl — through a scenario set served by the fault wall, directly and
// through iop (tunnel and normalized paths), and diffs their outcomes. The
// JavaScript clients live in testdata/js (package-lock.json committed;
// `make test` runs npm ci there).
package conformance
