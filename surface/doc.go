// Package surface describes each client API the edge serves — one
// [Surface] per route: the wire surface a provider declares to serve it
// natively, how its request body is decoded into a [Call], the encoder
// that renders normalized events in its format, the event dialect of its
// streams, and the shape of its errors.
//
// The gateway's handler, the request runtime (streamgate: encoders,
// terminals, error answers, the tunnel's event dialect) and the node's
// surface list (through the wire names) all read these descriptors.
// Adding a surface means writing its codec (codec/...) and its
// descriptor here.
//
// surface imports execution, codec and wire; nothing above them.
package surface
