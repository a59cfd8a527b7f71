#!/usr/bin/env sh
# Structured output: a JSON answer that follows the schema.
set -eu
curl -sS --fail-with-body "${IOP_URL:-http://127.0.0.1:8080}/v1/chat/completions" \
  -H "Content-Type: application/json" ${IOP_API_KEY:+-H "Authorization: Bearer $IOP_API_KEY"} \
  -d '{"model":"'"${IOP_MODEL:-iop-sim}"'","messages":[{"role":"user","content":"Paris"}],
       "response_format":{"type":"json_schema","json_schema":{"name":"city","schema":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}}}}'
echo
