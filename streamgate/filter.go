package streamgate

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/iopgw/iop/execution"
)

// FilterRule is one semantic filtering rule over assistant text.
type FilterRule struct {
	// Pattern is a regular expression (RE2) matched against each text delta.
	Pattern string
	// Action is block (end the response with a content_filter terminal) or
	// redact (replace the match).
	Action string
	// Replacement replaces a redacted match; default "[redacted]".
	Replacement string
}

// Filter applies configured rules to assistant text on the normalized
// path. Disabled (nil or no rules) it touches nothing. Matches are checked
// per delta: a pattern split across two deltas is not seen.
type Filter struct {
	rules []compiledRule
}

type compiledRule struct {
	re          *regexp.Regexp
	block       bool
	replacement string
}

// NewFilter compiles rules; an empty list gives a disabled filter.
func NewFilter(rules []FilterRule) (*Filter, error) {
	f := &Filter{}
	for i, r := range rules {
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("rules[%d].pattern: %w", i, err)
		}
		switch strings.ToLower(r.Action) {
		case "block":
			f.rules = append(f.rules, compiledRule{re: re, block: true})
		case "redact", "":
			repl := r.Replacement
			if repl == "" {
				repl = "[redacted]"
			}
			f.rules = append(f.rules, compiledRule{re: re, replacement: repl})
		default:
			return nil, fmt.Errorf("rules[%d].action: must be block or redact", i)
		}
	}
	return f, nil
}

func (f *Filter) enabled() bool { return f != nil && len(f.rules) > 0 }

// apply filters the text of ev; blocked is true when a block rule matched.
func (f *Filter) apply(ev execution.RunEvent) (execution.RunEvent, bool) {
	for _, r := range f.rules {
		for _, s := range []*string{&ev.Delta, &ev.Message} {
			if *s == "" || !r.re.MatchString(*s) {
				continue
			}
			if r.block {
				return ev, true
			}
			*s = r.re.ReplaceAllLiteralString(*s, r.replacement)
		}
	}
	return ev, false
}
