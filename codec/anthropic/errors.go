package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The error types of the Messages API.
const (
	TypeInvalidRequest  = "invalid_request_error"
	TypeAuthentication  = "authentication_error"
	TypePermission      = "permission_error"
	TypeNotFound        = "not_found_error"
	TypeRequestTooLarge = "request_too_large"
	TypeRateLimit       = "rate_limit_error"
	TypeAPI             = "api_error"
	TypeOverloaded      = "overloaded_error"
)

// Error is an error answer in the Messages API's shape:
// {"type":"error","error":{"type":...,"message":...}}.
type Error struct {
	Status  int
	Type    string
	Message string
}

// TypeForStatus is the error type the Messages API answers an HTTP status
// with.
func TypeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return TypeAuthentication
	case status == http.StatusForbidden:
		return TypePermission
	case status == http.StatusNotFound:
		return TypeNotFound
	case status == http.StatusRequestEntityTooLarge:
		return TypeRequestTooLarge
	case status == http.StatusTooManyRequests:
		return TypeRateLimit
	case status == http.StatusServiceUnavailable || status == 529:
		return TypeOverloaded
	case status >= 500:
		return TypeAPI
	}
	return TypeInvalidRequest
}

// StatusForType is the HTTP status of an error type (an error event in a
// stream carries only its type).
func StatusForType(typ string) int {
	switch typ {
	case TypeAuthentication:
		return http.StatusUnauthorized
	case TypePermission:
		return http.StatusForbidden
	case TypeNotFound:
		return http.StatusNotFound
	case TypeRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case TypeRateLimit:
		return http.StatusTooManyRequests
	case TypeOverloaded:
		return 529
	case TypeInvalidRequest:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// New is an error of status with the type the API gives that status.
func New(status int, msg string) *Error {
	return &Error{Status: status, Type: TypeForStatus(status), Message: msg}
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

// Body is the JSON error body.
func (e *Error) Body() []byte {
	b, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}{Type: "error", Error: struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{e.Type, e.Message}})
	return b
}

// SSE is the error event a stream ends with.
func (e *Error) SSE() []byte {
	out := append([]byte("event: error\ndata: "), e.Body()...)
	return append(out, '\n', '\n')
}

// InBand is the error event that ends a committed Messages stream with a
// typed terminal code (the runtime's: queue_full, response_stalled, …):
// the message leads with the code, the type is the API's nearest.
func InBand(code, msg string) []byte {
	if !strings.HasPrefix(msg, code) {
		msg = code + ": " + msg
	}
	return (&Error{Type: typeForCode(code), Message: msg}).SSE()
}

// typeForCode is the Messages API error type of a terminal code.
func typeForCode(code string) string {
	switch code {
	case "rate_limit_exceeded", "queue_full", "queue_timeout":
		return TypeRateLimit
	case "server_shutting_down", "upstream_unavailable", "no_provider_available":
		return TypeOverloaded
	}
	return TypeAPI
}
