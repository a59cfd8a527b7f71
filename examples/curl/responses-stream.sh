#!/usr/bin/env sh
# A streaming Responses API call: events from response.created to response.completed.
set -eu
curl -sS -N --fail-with-body "${IOP_URL:-http://127.0.0.1:8080}/v1/responses" \
  -H "Content-Type: application/json" ${IOP_API_KEY:+-H "Authorization: Bearer $IOP_API_KEY"} \
  -d '{"model":"'"${IOP_MODEL:-iop-sim}"'","stream":true,"input":"Say hello"}'
