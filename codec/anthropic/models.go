package anthropic

import "slices"

// ModelInfo is the API's description of a model, for a model iop
// serves: what iop does not know of it is null, and its release date,
// unknown, the epoch (the API's value for a model whose date it does not
// know).
type ModelInfo struct {
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

// ModelInfoOf describes the model iop serves as id; it is active.
func ModelInfoOf(id string) ModelInfo {
	return ModelInfo{Type: "model", ID: id, DisplayName: id, CreatedAt: "1970-01-01T00:00:00Z", Lifecycle: "active"}
}

// ModelPage is a page of the model list.
type ModelPage struct {
	Data    []ModelInfo `json:"data"`
	HasMore bool        `json:"has_more"`
	FirstID *string     `json:"first_id"`
	LastID  *string     `json:"last_id"`
}

// PageOfModels is the page of names (sorted) of at most limit models
// that follows after, or when before is set, precedes before. A cursor
// is a name, served or not: the page starts after (or ends before) where
// it sorts.
func PageOfModels(names []string, limit int, after, before string) ModelPage {
	var page []string
	more := false
	if before != "" {
		end, _ := slices.BinarySearch(names, before)
		start := max(0, end-limit)
		page, more = names[start:end], start > 0
	} else {
		start := 0
		if after != "" {
			var found bool
			if start, found = slices.BinarySearch(names, after); found {
				start++
			}
		}
		end := min(len(names), start+limit)
		page, more = names[start:end], end < len(names)
	}
	out := ModelPage{Data: make([]ModelInfo, 0, len(page)), HasMore: more}
	for _, m := range page {
		out.Data = append(out.Data, ModelInfoOf(m))
	}
	if len(page) > 0 {
		out.FirstID, out.LastID = &page[0], &page[len(page)-1]
	}
	return out
}
