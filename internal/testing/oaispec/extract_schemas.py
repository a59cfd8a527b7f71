#!/usr/bin/env python3
"""Extract the OpenAI schemas iop's tests validate against, with everything
they reference, from OpenAI's openapi.yaml into openai-schemas.json.

Usage: python3 extract_schemas.py path/to/openapi.yaml > openai-schemas.json
Source: github.com/openai/openai-openapi openapi.yaml, commit
f85dbe223d40e1a31cba812ab2d755c7e98a92a3 (info.version 2.3.0).
"""
import json, sys, yaml

ROOTS = [
    "CreateChatCompletionResponse", "CreateChatCompletionStreamResponse", "Response",
    "ResponseStreamEvent", "ErrorResponse", "ListModelsResponse", "Model",
    "CreateEmbeddingResponse", "CreateChatCompletionRequest", "CreateResponse",
]

spec = yaml.safe_load(open(sys.argv[1]))
schemas = spec["components"]["schemas"]
keep, todo = {}, list(ROOTS)

def refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#/components/schemas/"):
                yield v.rsplit("/", 1)[1]
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)

while todo:
    name = todo.pop()
    if name in keep:
        continue
    keep[name] = schemas[name]
    todo.extend(refs(schemas[name]))

out = {"openapi": "3.1.0", "info": {"title": "OpenAI schema subset for iop tests", "version": spec["info"]["version"]},
       "paths": {}, "components": {"schemas": dict(sorted(keep.items()))}}
json.dump(out, sys.stdout, indent=1, sort_keys=True)
