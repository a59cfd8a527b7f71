package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// CORSConfig lets browser pages on other origins call the API. Nothing is
// allowed by default; preflight requests are answered without
// authentication (browsers send no credentials on them), the actual
// request still needs a key.
type CORSConfig struct {
	// AllowedOrigins are the page origins allowed: "https://app.example.com",
	// "https://*.example.com" for every subdomain of example.com (the
	// wildcard stands for whole labels only), "*" alone for any origin.
	AllowedOrigins []string `koanf:"allowed_origins"`
	// AllowedMethods default to GET, HEAD, POST.
	AllowedMethods []string `koanf:"allowed_methods"`
	// AllowedHeaders default to the headers the preflight asks for (the
	// official SDKs send Authorization, Content-Type and x-stainless-*).
	AllowedHeaders []string `koanf:"allowed_headers"`
	// ExposedHeaders default to the ones clients read: X-Request-Id,
	// Retry-After and the x-ratelimit-* family.
	ExposedHeaders []string `koanf:"exposed_headers"`
	// MaxAge is how long a browser may cache a preflight; default 10m.
	MaxAge time.Duration `koanf:"max_age"`
	// AllowCredentials lets pages send cookies; never with "*".
	AllowCredentials bool `koanf:"allow_credentials"`
}

var defaultExposed = []string{"X-Request-Id", "Retry-After", "Retry-After-Ms", "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests",
	"X-Ratelimit-Reset-Requests", "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", "Openai-Processing-Ms"}

// validate records the mistakes in c: an origin is a scheme and a host
// ("https://app.example.com", with a port if any); a wildcard may stand
// only for whole leading DNS labels ("https://*.example.com"), never for
// part of a label or a scheme's every host; "*" alone is any origin, and
// never with credentials.
func (c CORSConfig) validate(bad badFunc) {
	for i, o := range c.AllowedOrigins {
		key := fmt.Sprintf("cors.allowed_origins[%d]", i)
		if o == "*" {
			if c.AllowCredentials {
				bad("cors.allow_credentials", "cannot be used with the origin \"*\"")
			}
			continue
		}
		if _, err := parseOriginPattern(o); err != nil {
			bad(key, "%v", err)
		}
	}
}

// originPattern is one allowed origin: exact, or any subdomain of a
// domain (a leading "*." standing for one or more whole labels).
type originPattern struct {
	scheme, host, port string
	subdomains         bool // host is a domain; the origin's host must be a subdomain of it
}

func parseOriginPattern(o string) (originPattern, error) {
	const shape = "must be an origin such as https://app.example.com, or https://*.example.com for its subdomains (scheme and host, no path)"
	wild := strings.Contains(o, "*")
	rest, hasWild := strings.CutPrefix(o, "https://*.")
	scheme := "https"
	if !hasWild {
		rest, hasWild = strings.CutPrefix(o, "http://*.")
		scheme = "http"
	}
	raw := o
	if hasWild {
		raw = scheme + "://" + rest
	}
	if wild && (!hasWild || strings.Contains(rest, "*")) {
		return originPattern{}, fmt.Errorf("a wildcard may stand only for whole leading labels of a domain (https://*.example.com): %s", shape)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.User != nil || u.Fragment != "" {
		return originPattern{}, errors.New(shape)
	}
	host := strings.ToLower(u.Hostname())
	if hasWild && !strings.Contains(host, ".") {
		return originPattern{}, fmt.Errorf("a wildcard needs a domain of at least two labels after it (https://*.example.com, not https://*.%s)", host)
	}
	return originPattern{scheme: u.Scheme, host: host, port: u.Port(), subdomains: hasWild}, nil
}

// match reports whether origin is allowed by p.
func (p originPattern) match(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != p.scheme || u.Port() != p.port || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if !p.subdomains {
		return host == p.host
	}
	sub, ok := strings.CutSuffix(host, "."+p.host)
	return ok && dnsLabels(sub)
}

// dnsLabels reports whether s is one or more dot-separated DNS labels.
func dnsLabels(s string) bool {
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

// originMatcher is the allowed-origin check of a configuration.
func originMatcher(origins []string) func(string) bool {
	var pats []originPattern
	any := false
	for _, o := range origins {
		if o == "*" {
			any = true
			continue
		}
		if p, err := parseOriginPattern(o); err == nil {
			pats = append(pats, p)
		}
	}
	return func(origin string) bool {
		if any {
			return true
		}
		for _, p := range pats {
			if p.match(origin) {
				return true
			}
		}
		return false
	}
}

// corsHandler is the CORS middleware of one configuration; nil when
// nothing is allowed.
func corsHandler(c CORSConfig) echo.MiddlewareFunc {
	if len(c.AllowedOrigins) == 0 {
		return nil
	}
	allowed := originMatcher(c.AllowedOrigins)
	mc := middleware.CORSConfig{AllowOriginFunc: func(o string) (bool, error) { return allowed(o), nil }, AllowMethods: c.AllowedMethods,
		AllowHeaders: c.AllowedHeaders, ExposeHeaders: c.ExposedHeaders, AllowCredentials: c.AllowCredentials, MaxAge: int(c.MaxAge.Seconds())}
	if len(mc.AllowMethods) == 0 {
		mc.AllowMethods = []string{echo.GET, echo.HEAD, echo.POST}
	}
	if len(mc.ExposeHeaders) == 0 {
		mc.ExposeHeaders = defaultExposed
	}
	if c.MaxAge == 0 {
		mc.MaxAge = 600
	}
	return middleware.CORSWithConfig(mc)
}

// corsState holds the middleware of the running configuration (replaced
// on reload).
type corsState struct {
	mw atomic.Pointer[echo.MiddlewareFunc]
}

func (s *corsState) set(c CORSConfig) {
	mw := corsHandler(c)
	s.mw.Store(&mw)
}

// cors applies the running CORS policy: before authentication, so a
// preflight is answered without a key.
func (g *Gateway) cors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		mw := g.corsMW.mw.Load()
		if mw == nil || *mw == nil {
			return next(c)
		}
		return (*mw)(next)(c)
	}
}
