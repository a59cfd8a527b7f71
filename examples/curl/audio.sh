#!/usr/bin/env sh
# Text to speech, then the audio transcribed (multipart, routed by its
# model field).
set -eu
url="${IOP_URL:-http://127.0.0.1:8080}"
wav="$(mktemp)"
trap 'rm -f "$wav"' EXIT
curl -sS --fail-with-body "$url/v1/audio/speech" -H "Content-Type: application/json" ${IOP_API_KEY:+-H "Authorization: Bearer $IOP_API_KEY"} \
  -d '{"model":"'"${IOP_MODEL:-iop-sim}"'","input":"Say hello","voice":"alloy","response_format":"wav"}' -o "$wav"
curl -sS --fail-with-body "$url/v1/audio/transcriptions" ${IOP_API_KEY:+-H "Authorization: Bearer $IOP_API_KEY"} \
  -F model="${IOP_MODEL:-iop-sim}" -F file=@"$wav;filename=hello.wav"
echo
