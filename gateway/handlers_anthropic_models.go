package gateway

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/codec/anthropic"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/internal/ids"
)

// Anthropic's API lists its models at the same path as OpenAI's
// (GET /v1/models and /v1/models/{id}) in a shape of its own; its SDKs
// send anthropic-version on every request, which is how the edge tells
// the two clients apart.
func anthropicClient(c echo.Context) bool {
	return c.Request().Header.Get("Anthropic-Version") != ""
}

// listAnthropicModels serves GET /v1/models to an Anthropic client: the
// models the key may use, in name order, a page at a time (limit, 1 to
// 1,000, default 20; after_id or before_id). Every model iop serves is
// active: a lifecycle filter without "active" lists none.
func (g *Gateway) listAnthropicModels(c echo.Context) error {
	q := c.Request().URL.Query()
	limit := 20
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return writeError(c, openai.InvalidRequest("limit", "limit: must be an integer from 1 to 1000, not %q", ids.Clip(s)))
		}
		limit = n
	}
	after, before := q.Get("after_id"), q.Get("before_id")
	if after != "" && before != "" {
		return writeError(c, openai.InvalidRequest("before_id", "before_id and after_id cannot be given together"))
	}
	var names []string
	if listsActive(q) {
		names = g.modelNames(c)
	}
	return c.JSON(http.StatusOK, anthropic.PageOfModels(names, limit, after, before))
}

// listsActive reports whether the list's lifecycle filter (repeated, as
// an array, or comma-separated) takes active models; none takes all.
func listsActive(q map[string][]string) bool {
	var stages []string
	for _, k := range []string{"lifecycle", "lifecycle[]"} {
		for _, v := range q[k] {
			stages = append(stages, strings.Split(v, ",")...)
		}
	}
	return len(stages) == 0 || slices.Contains(stages, "active")
}
