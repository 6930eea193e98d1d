"""The OpenAPI 3.1 document of the public routes, generated from the request schemas.

Served at ``GET /openapi.json`` so schema-driven tools (schemathesis, client
generators) can test and call the gateway. The request bodies are the very Structs the
validation stage decodes with, so the document cannot drift from what is enforced;
plan-dependent limits (how many messages, how long a part) are described, not encoded.
Only configured routes appear. Built once per route table.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

from .config.schema import RouteConfig
from .dialects.messages_schema import CountTokensRequest, MessagesRequest
from .dialects.responses_schema import ResponsesRequest
from .errors import Reason
from .validation.schemas import ROUTE_SCHEMAS

_REF = "#/components/schemas/{name}"


class ErrorBody(msgspec.Struct):
    message: str
    type: str
    param: str | None
    code: str


class ErrorEnvelope(msgspec.Struct):
    """OpenAI's error envelope; ``code`` is the gateway's reason code."""

    error: ErrorBody


_SUMMARIES = {
    "/v1/chat/completions": "Create a chat completion (OpenAI-compatible)",
    "/v1/completions": "Create a text completion (OpenAI-compatible)",
    "/v1/embeddings": "Create embeddings (OpenAI-compatible)",
    "/v1/models": "List the models the caller is entitled to",
    "/v1/responses": "Create a response (OpenAI Responses API)",
    "/v1/messages": "Create a message (Anthropic Messages API)",
    "/v1/messages/count_tokens": "Count a message's input tokens (Anthropic Messages API)",
}
# The dialects' request bodies (dialects/): the Structs the dialect stage decodes with.
DIALECT_SCHEMAS: dict[str, type[msgspec.Struct]] = {
    "/v1/responses": ResponsesRequest,
    "/v1/messages": MessagesRequest,
    "/v1/messages/count_tokens": CountTokensRequest,
}
SCHEMAS: dict[str, type[msgspec.Struct]] = {**ROUTE_SCHEMAS, **DIALECT_SCHEMAS}


def _error_responses() -> dict[str, Any]:
    error = {"application/json": {"schema": {"$ref": _REF.format(name="ErrorEnvelope")}}}
    return {
        "4XX": {"description": "Refused; `error.code` is the reason code", "content": error},
        "5XX": {"description": "Backend or budget store unavailable", "content": error},
    }


def _operation(route: RouteConfig, method: str) -> dict[str, Any]:
    schema = SCHEMAS.get(route.path)
    op: dict[str, Any] = {
        "operationId": f"{method.lower()}_{route.path.strip('/').replace('/', '_')}",
        "summary": _SUMMARIES.get(route.path, route.path),
        "responses": {"200": {"description": "The backend's answer",
                              "content": {"application/json": {"schema": {}}}}},
    }
    if schema is not None and method == "POST":
        op["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": {"$ref": _REF.format(name=schema.__name__)}}}}
        if route.path not in ("/v1/embeddings", "/v1/messages/count_tokens"):
            op["responses"]["200"]["content"]["text/event-stream"] = {"schema": {"type": "string"}}
    op["responses"].update(_error_responses())
    return op


def _health(summary: str) -> dict[str, Any]:
    return {"get": {"operationId": summary.lower().replace(" ", "_"), "summary": summary, "security": [],
                    "responses": {"200": {"description": "OK"}, "503": {"description": "Not ready"}}}}


@lru_cache(maxsize=8)
def openapi_document(routes: tuple[RouteConfig, ...]) -> bytes:
    served = [r for r in routes if r.path in SCHEMAS or r.path == "/v1/models"]
    schemas = [SCHEMAS[r.path] for r in served if r.path in SCHEMAS]
    _, components = msgspec.json.schema_components([*schemas, ErrorEnvelope], ref_template=_REF)
    error_body = components.get("ErrorBody")
    if error_body is not None:
        error_body["properties"]["code"] = {"enum": [reason.name for reason in Reason]}
    paths: dict[str, Any] = {}
    for route in served:
        paths[route.path] = {m.lower(): _operation(route, m) for m in route.methods if m in ("GET", "POST")}
    paths["/healthz"] = _health("Liveness")
    paths["/readyz"] = _health("Readiness")
    document = {
        "openapi": "3.1.0",
        "info": {"title": "tokenward gateway", "version": "1",
                 "description": "An LLM ingress gateway: OpenAI-compatible routes, strict request "
                                "schemas, work-based admission."},
        "paths": paths,
        "components": {"schemas": components,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }
    return msgspec.json.encode(document)
