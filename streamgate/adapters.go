package streamgate

import (
	"net/http"
	"time"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/surface"
)

// encoder renders normalized events for the request's surface (see
// [surface.Encoder]).
type encoder = surface.Encoder

// newEncoder returns a fresh encoder for req's surface, naming model.
func newEncoder(req *Request, model string) encoder {
	o := surface.EncodeOptions{Model: model, Stream: req.Stream, IncludeUsage: req.IncludeUsage, Echo: req.Echo, Now: time.Now()}
	if run := req.Work.Run; run != nil {
		o.Stops = run.Params.Stop
	}
	return req.Surface.Encoder(o)
}

// errorResponse renders a gateway-originated error in the surface's
// native shape.
func errorResponse(s *surface.Surface, e *openai.Error) (http.Header, []byte) {
	return s.Shape.Render(e)
}
