//go:build !unix

package main

// fitOpenStreams: the limit on descriptors is not raised here.
func fitOpenStreams(counts []int) []int { return counts }
