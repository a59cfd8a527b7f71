package gateway

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

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

// anthropicModel is Anthropic's ModelInfo for a model iop serves. What
// iop does not know of a model is null; its release date, unknown, is
// the epoch, as the API gives it for a model whose date it does not know.
type anthropicModel struct {
	Type           string  `json:"type"`
	ID             string  `json:"id"`
	DisplayName    string  `json:"display_name"`
	CreatedAt      string  `json:"created_at"`
	Lifecycle      string  `json:"lifecycle"`
	Capabilities   *string `json:"capabilities"`
	DeprecatedAt   *string `json:"deprecated_at"`
	RetiresAt      *string `json:"retires_at"`
	Line           *string `json:"line"`
	MaxInputTokens *int64  `json:"max_input_tokens"`
	MaxTokens      *int64  `json:"max_tokens"`
}

func anthropicModelOf(id string) anthropicModel {
	return anthropicModel{Type: "model", ID: id, DisplayName: id, CreatedAt: "1970-01-01T00:00:00Z", Lifecycle: "active"}
}

// anthropicPage is a page of Anthropic's model list.
type anthropicPage struct {
	Data    []anthropicModel `json:"data"`
	HasMore bool             `json:"has_more"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
}

// listAnthropicModels serves GET /v1/models to an Anthropic client: the
// models the key may use, in name order, a page at a time (limit, 1 to
// 1,000, default 20; after_id or before_id, a name the page starts after
// or ends before, whether or not it is still served). Every model iop
// serves is active: a lifecycle filter without "active" lists none.
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
	names := g.modelNames(c)
	if !listsActive(q) {
		names = nil
	}
	var page []string
	more := false
	if before != "" {
		end, _ := slices.BinarySearch(names, before)
		start := max(0, end-limit)
		page, more = names[start:end], start > 0
	} else {
		start := 0
		if after != "" {
			start, _ = slices.BinarySearch(names, after)
			if start < len(names) && names[start] == after {
				start++
			}
		}
		end := min(len(names), start+limit)
		page, more = names[start:end], end < len(names)
	}
	out := anthropicPage{Data: make([]anthropicModel, 0, len(page)), HasMore: more}
	for _, m := range page {
		out.Data = append(out.Data, anthropicModelOf(m))
	}
	if len(page) > 0 {
		out.FirstID, out.LastID = &page[0], &page[len(page)-1]
	}
	return c.JSON(http.StatusOK, out)
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
