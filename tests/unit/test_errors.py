from tokenward.errors import Reason, Refusal, envelope
import orjson


def test_every_reason_is_its_own_member():
    # Equal (status, type) pairs must not collapse into aliases.
    names = [name for name in Reason.__members__]
    assert len(names) == len(Reason) == len({r.value for r in Reason})
    assert Reason.key_scope_denied.name == "key_scope_denied"
    assert Reason.stream_idle_timeout is not Reason.upstream_timeout


def test_envelope_is_openai_shaped():
    body = orjson.loads(envelope(Reason.token_budget, "no budget", "max_tokens"))
    assert body == {"error": {"message": "no budget", "type": "rate_limit_error", "param": "max_tokens",
                              "code": "token_budget"}}
    assert Refusal(Reason.body_too_large, "x").status == 413


def test_reason_code_doc_lists_every_code_with_its_status():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "reason-codes.md").read_text()
    for reason in Reason:
        assert f"| `{reason.name}` | {reason.status} | {reason.error_type} |" in doc, reason.name
