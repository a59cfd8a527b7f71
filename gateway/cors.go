package gateway

import (
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
	// AllowedOrigins are the page origins allowed ("https://app.example.com";
	// "*" in a host matches any run of characters, "*" alone any origin).
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

// validate records the mistakes in c.
func (c CORSConfig) validate(bad badFunc) {
	for i, o := range c.AllowedOrigins {
		if o == "*" {
			if c.AllowCredentials {
				bad("cors.allow_credentials", "cannot be used with the origin \"*\"")
			}
			continue
		}
		u, err := url.Parse(strings.ReplaceAll(o, "*", "x"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad(fmt.Sprintf("cors.allowed_origins[%d]", i), "must be an origin such as https://app.example.com (scheme and host, no path)")
		}
	}
}

// corsHandler is the CORS middleware of one configuration; nil when
// nothing is allowed.
func corsHandler(c CORSConfig) echo.MiddlewareFunc {
	if len(c.AllowedOrigins) == 0 {
		return nil
	}
	mc := middleware.CORSConfig{AllowOrigins: c.AllowedOrigins, AllowMethods: c.AllowedMethods, AllowHeaders: c.AllowedHeaders,
		ExposeHeaders: c.ExposedHeaders, AllowCredentials: c.AllowCredentials, MaxAge: int(c.MaxAge.Seconds())}
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
