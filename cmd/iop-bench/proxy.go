package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// runProxy is the naive Go reverse proxy: the floor every Go gateway must
// justify itself against.
func runProxy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	upstream := fs.String("upstream", "", "upstream base URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	target, err := url.Parse(*upstream)
	if err != nil {
		return err
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 1024, ForceAttemptHTTP2: false}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: rp}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
