"""Each dialect's error envelope and rate-limit headers, judged by the official SDKs."""

from __future__ import annotations

import json
from datetime import datetime

import anthropic
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenward.budget.policy import format_reset
from tokenward.dialects import ratelimit
from tokenward.dialects.envelopes import anthropic_error_type, error_body, messages_error_body, responses_error_body
from tokenward.errors import Reason, envelope

from .loopback import serving

ANTHROPIC_SDK_TYPES = {"invalid_request_error", "authentication_error", "billing_error", "permission_error",
                       "not_found_error", "rate_limit_error", "timeout_error", "api_error", "overloaded_error"}


@pytest.mark.parametrize("reason", list(Reason), ids=lambda r: r.name)
def test_every_reason_has_an_anthropic_error_type_the_sdk_knows(reason):
    body = json.loads(messages_error_body(reason.name, reason.status, "why", request_id="req_1"))
    assert body["error"]["code"] == reason.name and body["request_id"] == "req_1"
    if body["error"]["type"] == "request_too_large":   # documented by Anthropic for 413; not in the SDK's union
        assert reason.status == 413
        return
    assert body["error"]["type"] in ANTHROPIC_SDK_TYPES
    parsed = anthropic.types.ErrorResponse.model_validate(body)
    assert parsed.error.message == "why"


@pytest.mark.parametrize("code, status, expected", [
    ("invalid_field", 400, "invalid_request_error"), ("a_code_not_in_the_enum", 400, "invalid_request_error"),
    ("invalid_credentials", 401, "authentication_error"), ("model_not_entitled", 403, "permission_error"),
    ("route_denied", 404, "not_found_error"), ("unknown_model", 404, "not_found_error"),
    ("body_too_large", 413, "request_too_large"), ("token_budget", 429, "rate_limit_error"),
    ("internal_error", 500, "api_error"), ("upstream_error", 502, "api_error"),
    ("upstream_overloaded", 503, "overloaded_error"), ("upstream_timeout", 504, "timeout_error"),
    ("client_disconnected", 499, "invalid_request_error"), ("transfer_encoding_unsupported", 501, "api_error"),
])
def test_anthropic_error_types(code, status, expected):
    assert anthropic_error_type(code, status) == expected


def test_responses_envelope_is_the_gateways_openai_envelope():
    reason = Reason.token_budget
    assert responses_error_body(reason.name, reason.error_type, "slow down", None) == envelope(reason, "slow down")
    assert error_body("responses", reason.name, 429, reason.error_type, "m") == envelope(reason, "m")
    assert json.loads(error_body("messages", "token_budget", 429, "rate_limit_error", "m"))["type"] == "error"


@pytest.mark.parametrize("status, code, exc", [
    (400, "a_code_not_in_the_enum", "BadRequestError"), (401, "invalid_credentials", "AuthenticationError"),
    (403, "tools_not_entitled", "PermissionDeniedError"), (404, "route_denied", "NotFoundError"),
    (413, "body_too_large", "ContentTooLargeError"), (429, "token_budget", "RateLimitError"),
])
def test_the_anthropic_sdk_raises_its_own_exception_with_our_code(status, code, exc):
    body = messages_error_body(code, status, "refused: " + code)
    with serving(status, body, headers={"x-should-retry": "false", "x-tokenward-reason": code}) as (url, canned):
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=2)
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert type(caught.value).__name__ == exc
    assert caught.value.body["error"]["code"] == code and "refused: " + code in str(caught.value)
    assert len(canned.requests) == 1     # x-should-retry: false, so not retried


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_terminal_429_is_not_retried_and_a_plain_one_is(sdk):
    def attempts(headers: dict[str, str]) -> int:
        body = (envelope(Reason.token_budget, "budget") if sdk == "openai"
                else messages_error_body("token_budget", 429, "budget"))
        with serving(429, body, headers=headers) as (url, canned):
            with pytest.raises(Exception):
                if sdk == "openai":
                    openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=2).responses.create(
                        model="m", input="x")
                else:
                    anthropic.Anthropic(base_url=url, api_key="k", max_retries=2).messages.create(
                        model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
            return len(canned.requests)

    assert attempts({"x-should-retry": "false", "retry-after-ms": "5"}) == 1
    assert attempts({"retry-after-ms": "5"}) == 3


@given(st.integers(0, 10**8))
def test_reset_durations_read_back_as_the_budget_writes_them(ms):
    text = format_reset(ms)
    assert ratelimit.format_duration(ms) == text
    back = ratelimit.duration_ms(text)
    assert ms <= back < ms + 1000 if ms >= 1000 else back == ms


@pytest.mark.parametrize("text", ["", "soon", "5", "1h2x", "ms"])
def test_unreadable_resets(text):
    assert ratelimit.duration_ms(text) is None


def test_anthropic_headers_from_the_budgets_openai_headers():
    now = 1_764_720_000.25          # 2025-12-03T00:00:00.25Z
    headers = [(b"x-request-id", b"r1"), (b"x-ratelimit-limit-tokens", b"10000"),
               (b"x-ratelimit-limit-requests", b"60"), (b"x-ratelimit-remaining-tokens", b"9000"),
               (b"x-ratelimit-reset-tokens", b"6m0s"), (b"x-ratelimit-remaining-requests", b"59"),
               (b"x-ratelimit-reset-requests", b"20ms"), (b"x-ratelimit-reset-tokens-extra", b"1s"),
               (b"retry-after", b"2"), (b"x-should-retry", b"false")]
    assert ratelimit.anthropic_from_openai(headers, now) == [
        (b"x-request-id", b"r1"), (b"anthropic-ratelimit-tokens-limit", b"10000"),
        (b"anthropic-ratelimit-requests-limit", b"60"), (b"anthropic-ratelimit-tokens-remaining", b"9000"),
        (b"anthropic-ratelimit-tokens-reset", b"2025-12-03T00:06:01Z"),
        (b"anthropic-ratelimit-requests-remaining", b"59"),
        (b"anthropic-ratelimit-requests-reset", b"2025-12-03T00:00:01Z"),
        (b"retry-after", b"2"), (b"x-should-retry", b"false")]


def test_resets_and_retry_after_in_anthropics_convention():
    now = 1_764_720_000.0
    got = dict(ratelimit.anthropic_from_openai([(b"x-ratelimit-reset-tokens", ratelimit.format_duration(61_000).encode()),
                                                (b"x-ratelimit-remaining-requests", b"0")], now))
    assert got[b"anthropic-ratelimit-requests-remaining"] == b"0"
    reset = datetime.fromisoformat(got[b"anthropic-ratelimit-tokens-reset"].decode().replace("Z", "+00:00"))
    assert reset.timestamp() == now + 61
    assert ratelimit.retry_after(1500) == (b"retry-after", b"2") and ratelimit.retry_after(0) == (b"retry-after", b"1")
