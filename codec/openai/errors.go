// Package openai decodes and validates OpenAI Chat Completions and Responses
// requests into provider-neutral execution requests, and renders execution
// events as OpenAI's wire formats: chat.completion JSON, chat chunk SSE,
// Response JSON and Responses event SSE, plus the OpenAI error shape. It
// imports execution and the standard library only; the edge (normalized
// path) and the sim provider (tunnel path) share it.
package openai

import (
	"fmt"
	"net/http"

	"github.com/iopgw/iop/codec/jsonstrict"
)

// Error is an OpenAI-shaped error: an HTTP status and the four fields of
// {"error":{"message","type","param","code"}}.
type Error struct {
	Status  int
	Type    string
	Code    string // empty renders as null
	Param   string // empty renders as null
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// The error types OpenAI uses.
const (
	TypeInvalidRequest     = "invalid_request_error"
	TypeAuthentication     = "authentication_error"
	TypeRateLimit          = "rate_limit_error"
	TypeServer             = "server_error"
	TypeServiceUnavailable = "service_unavailable_error"
	TypeUpstream           = "upstream_error"
	TypeTimeout            = "timeout_error"
)

// InvalidRequest returns a 400 invalid_request_error naming param.
func InvalidRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

// ModelNotFound returns the 404 model_not_found error.
func ModelNotFound(model string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", clip(model, 256))}
}

// ModelUnavailable returns the 503 model_unavailable error of a model that
// is configured but has no connected provider right now.
func ModelUnavailable(model string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, Code: "model_unavailable", Param: "model",
		Message: fmt.Sprintf("The model `%s` has no provider connected right now. Please retry shortly.", clip(model, 256))}
}

type wireError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *Error) wire() wireError {
	w := wireError{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		w.Param = &e.Param
	}
	if e.Code != "" {
		w.Code = &e.Code
	}
	return w
}

// Body renders {"error":{...}}.
func (e *Error) Body() []byte {
	b, _ := jsonstrict.Marshal(struct {
		Error wireError `json:"error"`
	}{e.wire()})
	return b
}

// SSE renders the error as one chat-completions stream event:
// data: {"error":{...}}\n\n — what every SDK treats as a stream error.
func (e *Error) SSE() []byte {
	b := append([]byte("data: "), e.Body()...)
	return append(b, '\n', '\n')
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
