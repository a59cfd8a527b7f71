package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/pool"
)

func init() {
	commands["status"] = command{summary: "show nodes and providers of a running edge (--admin URL)", run: runStatus}
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", "http://127.0.0.1:8081", "the edge's admin URL")
	token := fs.String("token", os.Getenv("IOP_ADMIN_TOKEN"), "admin bearer token (default $IOP_ADMIN_TOKEN)")
	asJSON := fs.Bool("json", false, "print the raw JSON")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	var body struct {
		Providers []pool.ProviderSnapshot `json:"providers"`
		Models    []gateway.ModelStats    `json:"models"`
	}
	raw, err := adminGet(ctx, strings.TrimRight(*admin, "/")+"/admin/providers", *token)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := stdout.Write(raw)
		return err
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return fmt.Errorf("decoding /admin/providers: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tGEN\tADAPTER\tPATH\tMODELS\tCAPACITY\tIN FLIGHT\tQUEUE\tSTATUS\tHEALTH\tREASON\tSEQ\tPROBE")
	for _, p := range body.Providers {
		capacity := fmt.Sprintf("%d/%d", p.EffectiveCapacity, p.ConfiguredCapacity)
		if p.AdvertisedCapacity > 0 {
			capacity += fmt.Sprintf(" (advertised %d, cut by node_limits.max_capacity)", p.AdvertisedCapacity)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%s\n", p.ProviderID, p.ConnectionGeneration, p.Adapter, p.ExecutionPath,
			strings.Join(p.Models, ","), capacity, p.InFlight, p.QueueDepth, p.Status, p.Health, dash(p.OverlayReason),
			p.LastObservationSeq, dash(p.Probe))
	}
	if len(body.Models) > 0 {
		fmt.Fprintln(tw, "\nMODEL\tREQUESTS\tRETRIES\tFALLBACKS\tRESUMES\tPOLICY")
		for _, m := range body.Models {
			pol := fmt.Sprintf("retries %d on %s", m.Policy.Retries, m.Policy.RetryOn)
			if m.Policy.FirstTokenTimeout != "" {
				pol += ", first token " + m.Policy.FirstTokenTimeout
			}
			if len(m.Policy.Fallbacks) > 0 {
				pol += ", then " + strings.Join(m.Policy.Fallbacks, " → ")
			}
			if m.Policy.Resume {
				pol += ", resume"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", m.Model, m.Requests, m.Retries, m.Fallbacks, m.Resumes, pol)
		}
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func adminGet(ctx context.Context, url, token string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return b, nil
}
