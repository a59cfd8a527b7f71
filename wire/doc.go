// Package wire is the node link: the protobuf messages and gRPC service
// between node agents and edges (nodelink.proto, generated code committed;
// `make proto` regenerates it), the keepalive and message-size bounds
// both sides use (keepalive.go), and the one mapping between those
// messages and the execution types (mapping.go), both directions in one
// place so the edge and the node cannot disagree.
//
// The node dials; the edge authenticates the node's bearer token (and,
// with mTLS, its certificate), takes its advertisement, and dispatches
// attempts, each on its own stream opened by the node. Everything a node
// sends is untrusted input to the edge.
package wire
