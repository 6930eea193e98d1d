"""The OpenAPI document: served by the gateway, generated from the enforced schemas."""

from __future__ import annotations

import httpx
import msgspec
import pytest
import schemathesis

from tokenward.validation.schemas import ChatCompletionRequest

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_openapi_document_is_served(client):
    async with httpx.AsyncClient(base_url=client.running.url) as http:
        resp = await http.get("/openapi.json")
        assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
        doc = resp.json()
        assert (await http.post("/openapi.json")).status_code == 404  # only GET; the rest is route_denied
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models",
                                 "/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/healthz", "/readyz"}
    body_ref = doc["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]
    assert body_ref["schema"]["$ref"] == "#/components/schemas/ChatCompletionRequest"
    components = doc["components"]["schemas"]
    # The document is the enforced schema: strict objects, the same fields.
    assert components["ChatCompletionRequest"]["additionalProperties"] is False
    assert set(components["ChatCompletionRequest"]["properties"]) == set(ChatCompletionRequest.__struct_fields__)
    assert "unknown_field" in components["ErrorBody"]["properties"]["code"]["enum"]
    # the dialects' routes, with the Structs the dialect stage decodes (dialects/)
    for path, schema in (("/v1/responses", "ResponsesRequest"), ("/v1/messages", "MessagesRequest"),
                         ("/v1/messages/count_tokens", "CountTokensRequest")):
        body = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        assert body["schema"]["$ref"] == f"#/components/schemas/{schema}"
        assert schema in components
    assert "text/event-stream" not in doc["paths"]["/v1/messages/count_tokens"]["post"]["responses"]["200"]["content"]
    operations = [result.ok() for result in schemathesis.openapi.from_dict(doc).get_all_operations()]
    assert len(operations) == 9


async def test_document_examples_validate_against_the_gateway(client):
    """The document's own shapes, filled minimally, pass the strict decoder."""
    body = {"model": "small-chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1}
    assert msgspec.json.decode(msgspec.json.encode(body), type=ChatCompletionRequest).model == "small-chat"
    await client.admitted("/v1/chat/completions", body)
