// Package openapi embeds the OpenAPI 3.1 document of iop's own HTTP
// surface (iop.yaml): the OpenAI subset, the Ollama routes and the admin
// routes. The gateway serves it at GET /openapi.yaml; a test keeps it and
// the registered routes in step.
package openapi

import _ "embed"

// Spec is the document.
//
//go:embed iop.yaml
var Spec []byte
