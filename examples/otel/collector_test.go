// Package otel holds an OpenTelemetry Collector configuration for iop's
// traces; this test checks it against iop's tracing settings.
package otel

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/iopgw/iop/internal/tracing"
)

// TestCollectorTakesIOPTraces: the collector listens for OTLP/HTTP where
// the documented iop setting sends it, and pipes traces from that receiver.
func TestCollectorTakesIOPTraces(t *testing.T) {
	b, err := os.ReadFile("collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Receivers struct {
			OTLP struct {
				Protocols struct {
					HTTP struct{ Endpoint string } `yaml:"http"`
				} `yaml:"protocols"`
			} `yaml:"otlp"`
		} `yaml:"receivers"`
		Service struct {
			Pipelines struct {
				Traces struct{ Receivers, Exporters []string } `yaml:"traces"`
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(c.Receivers.OTLP.Protocols.HTTP.Endpoint, ":4318") {
		t.Fatalf("the OTLP/HTTP receiver listens on %q, not :4318", c.Receivers.OTLP.Protocols.HTTP.Endpoint)
	}
	if len(c.Service.Pipelines.Traces.Receivers) == 0 || c.Service.Pipelines.Traces.Receivers[0] != "otlp" || len(c.Service.Pipelines.Traces.Exporters) == 0 {
		t.Fatalf("the traces pipeline %+v", c.Service.Pipelines.Traces)
	}
	// The setting the file's comment documents is valid for iop.
	if err := (tracing.Config{Enabled: true, Endpoint: "http://127.0.0.1:4318"}).Validate("tracing"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "endpoint: http://127.0.0.1:4318") {
		t.Fatal("the comment no longer shows the iop setting")
	}
}
