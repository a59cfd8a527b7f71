#!/usr/bin/env sh
# An Anthropic Messages request (x-api-key or Bearer both work).
set -eu
curl -sS --fail-with-body "${IOP_URL:-http://127.0.0.1:8080}/v1/messages" \
  -H "Content-Type: application/json" -H "anthropic-version: 2023-06-01" ${IOP_API_KEY:+-H "x-api-key: $IOP_API_KEY"} \
  -d '{"model":"'"${IOP_MODEL:-iop-sim}"'","max_tokens":64,"messages":[{"role":"user","content":"Say hello"}]}'
echo
