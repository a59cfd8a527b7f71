package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/internal/konfig"
	"github.com/iopgw/iop/nodeagent"
)

func init() {
	commands["check"] = command{summary: "validate a configuration file without running it (exit 0 valid, 1 invalid)", run: runCheck}
}

func runCheck(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "the configuration file to check (required)")
	kind := fs.String("kind", "", "gateway, node or dev (default: from the file's keys)")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if *path == "" {
		fmt.Fprintln(stderr, "iop check: --config FILE is required")
		return errUsage
	}
	k := *kind
	if k == "" {
		var err error
		if k, err = configKind(*path); err != nil {
			return err
		}
	}
	if err := checkConfig(k, *path); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: valid %s configuration\n", *path, k)
	return nil
}

// configKind guesses what a file configures from its top-level keys.
func configKind(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var top map[string]any
	if err := yaml.Unmarshal(raw, &top); err != nil {
		return "", fmt.Errorf("config %s: %w", path, err)
	}
	switch {
	case top["node_id"] != nil || top["edges"] != nil:
		return "node", nil
	case top["gateway"] != nil:
		return "dev", nil
	}
	return "gateway", nil
}

// checkConfig loads and validates path as kind, exactly as running it would.
func checkConfig(kind, path string) error {
	switch kind {
	case "gateway":
		cfg, err := gateway.LoadConfig(path)
		if err == nil && len(cfg.Node) > 0 {
			_, err = bundledNodeConfig(cfg.Node, cfg.BundledNodeID()) // all in one
			if err != nil {
				err = fmt.Errorf("config %s: %w", path, err)
			}
		}
		return err
	case "node":
		_, err := nodeagent.LoadConfig(path)
		return err
	case "dev":
		cfg := defaultDevConfig()
		if err := konfig.Load(path, &cfg); err != nil {
			return err
		}
		cfg.Gateway.Nodes = []fleet.NodeConfig{{ID: cfg.Node.NodeID, Token: "check"}}
		cfg.Node.Token, cfg.Node.Edges = "check", []nodeagent.EdgeConfig{{Address: "127.0.0.1:1"}}
		if len(cfg.Node.Providers) == 0 {
			cfg.Node.Providers = defaultDevProviders()
		}
		err := cfg.Gateway.Validate()
		if nerr := cfg.Node.Resolve(); nerr != nil {
			err = errors.Join(err, nerr)
		}
		if err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
		return nil
	}
	return fmt.Errorf("--kind must be gateway, node or dev, not %q", kind)
}
