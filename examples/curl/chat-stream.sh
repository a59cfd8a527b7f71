#!/usr/bin/env sh
# A streaming chat completion: SSE chunks ending with data: [DONE].
set -eu
curl -sS -N --fail-with-body "${IOP_URL:-http://127.0.0.1:8080}/v1/chat/completions" \
  -H "Content-Type: application/json" ${IOP_API_KEY:+-H "Authorization: Bearer $IOP_API_KEY"} \
  -d '{"model":"'"${IOP_MODEL:-iop-sim}"'","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello"}]}'
