package ids

import (
	"regexp"
	"testing"
)

func TestNewWithIsThePrefixAndNinetySixRandomBits(t *testing.T) {
	shape := regexp.MustCompile(`^req_[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewWith("req_")
		if !shape.MatchString(id) {
			t.Fatalf("NewWith(%q) = %q, want req_ and 24 hex digits", "req_", id)
		}
		if seen[id] {
			t.Fatalf("NewWith repeated %q", id)
		}
		seen[id] = true
	}
	if id := New(); !regexp.MustCompile(`^[0-9a-f]{24}$`).MatchString(id) {
		t.Fatalf("New() = %q, want 24 hex digits", id)
	}
}
