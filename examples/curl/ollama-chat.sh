#!/usr/bin/env sh
# Ollama's /api/chat through iop: NDJSON lines ending with "done":true.
set -eu
curl -sS -N --fail-with-body "${IOP_URL:-http://127.0.0.1:8080}/api/chat" \
  -H "Content-Type: application/json" ${IOP_API_KEY:+-H "Authorization: Bearer $IOP_API_KEY"} \
  -d '{"model":"'"${IOP_MODEL:-iop-sim}"'","messages":[{"role":"user","content":"Say hello"}]}'
