//go:build unix

package main

import (
	"slices"
	"testing"
)

func TestFitCounts(t *testing.T) {
	for _, c := range []struct {
		limit  int
		counts []int
		want   []int
	}{
		{1 << 20, []int{1000, 10000}, []int{1000, 10000}},
		{21024, []int{1000, 10000}, []int{1000, 10000}},
		{20000, []int{1000, 10000}, []int{1000, 9000}},
		{2500, []int{1000, 10000}, []int{738}},
		{1024, []int{1000}, []int{}},
		{4000, []int{1000, 10000}, []int{1000}},
	} {
		if got := fitCounts(c.counts, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("limit %d: %v, want %v", c.limit, got, c.want)
		}
	}
}
