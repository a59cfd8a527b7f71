#!/usr/bin/env sh
# One JSON chat completion.
set -eu
curl -sS --fail-with-body "${IOP_URL:-http://127.0.0.1:8080}/v1/chat/completions" \
  -H "Content-Type: application/json" ${IOP_API_KEY:+-H "Authorization: Bearer $IOP_API_KEY"} \
  -d '{"model":"'"${IOP_MODEL:-iop-sim}"'","messages":[{"role":"user","content":"Say hello"}]}'
echo
