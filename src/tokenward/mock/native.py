"""The mock's own ``/v1/responses`` and ``/v1/messages``: a backend that serves those APIs itself.

For the gateway's native forwarding (``upstreams.NAME.dialects``): the answer is the
mock's usual ``tok tok ...`` of ``x-mock-tokens`` (or the output bound) tokens, whole or
streamed in the API's own events, with the API's own usage (Responses' ``usage`` in
``response.completed``; Anthropic's in ``message_start`` and ``message_delta``). Written
here from the wire formats alone (the mock sits below the gateway's dialect code and does
not share it), lean: no token rate, holds or faults beyond ``x-mock-status``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .formats import TOKEN_TEXT, Plan, build_plan, encode
from .steering import BadRequest, Steering

RESPONSES, MESSAGES = "responses", "messages"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def last_text(route: str, body: dict[str, Any]) -> str:
    """The last user text: what ``x-mock-tool-call`` echoes as the call's arguments."""
    if route == RESPONSES:
        items = body.get("input")
        if isinstance(items, str):
            return items
        turns = [i for i in items or () if isinstance(i, dict) and i.get("role") == "user"]
    else:
        turns = [m for m in body.get("messages") or () if isinstance(m, dict) and m.get("role") == "user"]
    return _text_of(turns[-1].get("content")) if turns else ""


def holds_tool_result(route: str, body: dict[str, Any]) -> bool:
    """Whether a request carries a tool's result: a chat ``tool`` message, a Responses
    ``*_output`` item, a Messages ``tool_result`` block (``x-mock-tool-once``)."""
    if route == RESPONSES:
        items = body.get("input")
        return isinstance(items, list) and any(
            isinstance(i, dict) and str(i.get("type", "")).endswith("_output") for i in items)
    messages = body.get("messages")
    if not isinstance(messages, list):
        return False
    if route != MESSAGES:
        return any(isinstance(m, dict) and m.get("role") in ("tool", "function") for m in messages)
    return any(isinstance(b, dict) and b.get("type") == "tool_result"
               for m in messages if isinstance(m, dict) and isinstance(m.get("content"), list)
               for b in m["content"])


def plan_for(route: str, body: dict[str, Any], steer: Steering) -> Plan:
    """The chat plan of a native request: its messages' text, its output bound."""
    if route == RESPONSES:
        items = body.get("input")
        turns = [{"role": "user", "content": items}] if isinstance(items, str) else [
            {"role": "user", "content": _text_of(i.get("content"))} for i in items or () if isinstance(i, dict)]
        bound = body.get("max_output_tokens")
    else:
        turns = [{"role": "user", "content": _text_of(m.get("content"))}
                 for m in body.get("messages") or () if isinstance(m, dict)]
        bound = body.get("max_tokens")
    if bound is not None and (type(bound) is not int or bound < 1):
        raise BadRequest("the output bound must be an integer >= 1")
    chat = {"model": body.get("model", "mock-model"), "messages": turns, "max_tokens": bound}
    return build_plan(True, chat, steer)


def _sse(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + encode(payload) + b"\n\n"


def responses_answer(plan: Plan, rid: str, created: int, stream: bool, usage_sent: bool = True,
                     echo: list[str] | None = None) -> bytes:
    """The answer: ``tok`` x the output bound, or (``echo``) the request's last user text in
    those pieces, one delta each."""
    deltas = echo if echo is not None else [TOKEN_TEXT] * plan.tokens
    text = "".join(deltas)
    done = plan.finish != "length"
    usage = {"input_tokens": plan.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": plan.tokens, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": plan.prompt_tokens + plan.tokens}
    part = {"type": "output_text", "text": text, "annotations": []}
    item = {"id": f"msg_{rid}", "type": "message", "role": "assistant", "status": "completed", "content": [part]}
    response = {"id": f"resp_{rid}", "object": "response", "created_at": created, "model": plan.model,
                "status": "completed" if done else "incomplete", "output": [item], "usage": usage, "error": None,
                "incomplete_details": None if done else {"reason": "max_output_tokens"},
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "store": False}
    if not stream:
        return encode(response)
    seq = iter(range(10 ** 9))
    shell = {**response, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    out = [_sse("response.created", {"type": "response.created", "sequence_number": next(seq), "response": shell}),
           _sse("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                               "output_index": 0, "item": {**item, "status": "in_progress",
                                                                           "content": []}}),
           _sse("response.content_part.added", {"type": "response.content_part.added", "sequence_number": next(seq),
                                                "item_id": item["id"], "output_index": 0, "content_index": 0,
                                                "part": {**part, "text": ""}})]
    for delta in deltas:
        out.append(_sse("response.output_text.delta", {
            "type": "response.output_text.delta", "sequence_number": next(seq), "item_id": item["id"],
            "output_index": 0, "content_index": 0, "delta": delta, "logprobs": []}))
    where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    out += [_sse("response.output_text.done", {"type": "response.output_text.done", "sequence_number": next(seq),
                                               **where, "text": text, "logprobs": []}),
            _sse("response.content_part.done", {"type": "response.content_part.done", "sequence_number": next(seq),
                                                **where, "part": part}),
            _sse("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                               "output_index": 0, "item": item})]
    end = "response.completed" if done else "response.incomplete"
    if not usage_sent:     # x-mock-no-usage: a server that reports none
        response = {**response, "usage": None}
    out.append(_sse(end, {"type": end, "sequence_number": next(seq), "response": response}))
    return b"".join(out)


def messages_answer(plan: Plan, rid: str, stream: bool, echo: list[str] | None = None) -> bytes:
    deltas = echo if echo is not None else [TOKEN_TEXT] * plan.tokens
    text = "".join(deltas)
    stop = "max_tokens" if plan.finish == "length" else "end_turn"
    message = {"id": f"msg_{rid}", "type": "message", "role": "assistant", "model": plan.model,
               "content": [{"type": "text", "text": text}], "stop_reason": stop, "stop_sequence": None,
               "usage": {"input_tokens": plan.prompt_tokens, "output_tokens": plan.tokens}}
    if not stream:
        return encode(message)
    start = {**message, "content": [], "stop_reason": None,
             "usage": {"input_tokens": plan.prompt_tokens, "output_tokens": 1}}
    out = [_sse("message_start", {"type": "message_start", "message": start}),
           _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}})]
    out += [_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": delta}})
            for delta in deltas]
    out += [_sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": plan.tokens}}),
            _sse("message_stop", {"type": "message_stop"})]
    return b"".join(out)


def echo_pieces(route: str, body: dict[str, Any], size: int) -> list[str]:
    """``x-mock-echo: N``: the last user text, in pieces of N characters."""
    return _pieces(last_text(route, body), max(size, 1))


def _pieces(text: str, size: int = 5) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def responses_call(plan: Plan, rid: str, created: int, stream: bool, name: str, args: str) -> bytes:
    """A function call of ``name`` with ``args`` (``x-mock-tool-call``, ``x-mock-tool-args``);
    ``NAMESPACE.TOOL`` is a call of TOOL inside a ``namespace`` tool (a dot is in no function's name)."""
    space, dot, tool = name.rpartition(".")
    item: dict[str, Any] = {"id": f"fc_{rid}", "type": "function_call", "call_id": f"call_{rid}", "name": tool,
                            "arguments": args, "status": "completed"}
    if dot:
        item["namespace"] = space
    usage = {"input_tokens": plan.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": len(_pieces(args)), "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": plan.prompt_tokens + len(_pieces(args))}
    response = {"id": f"resp_{rid}", "object": "response", "created_at": created, "model": plan.model,
                "status": "completed", "output": [item], "usage": usage, "error": None, "incomplete_details": None,
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "store": False}
    if not stream:
        return encode(response)
    seq = iter(range(10 ** 9))
    out = [_sse("response.created", {"type": "response.created", "sequence_number": next(seq),
                                     "response": {**response, "status": "in_progress", "output": [], "usage": None}}),
           _sse("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                               "output_index": 0, "item": {**item, "arguments": "",
                                                                           "status": "in_progress"}})]
    for piece in _pieces(args):
        out.append(_sse("response.function_call_arguments.delta", {
            "type": "response.function_call_arguments.delta", "sequence_number": next(seq), "item_id": item["id"],
            "output_index": 0, "delta": piece}))
    out += [_sse("response.function_call_arguments.done", {
                "type": "response.function_call_arguments.done", "sequence_number": next(seq), "item_id": item["id"],
                "output_index": 0, "arguments": args, "name": tool}),
            _sse("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                               "output_index": 0, "item": item}),
            _sse("response.completed", {"type": "response.completed", "sequence_number": next(seq),
                                        "response": response})]
    return b"".join(out)


def messages_call(plan: Plan, rid: str, stream: bool, name: str, args: str) -> bytes:
    """A ``tool_use`` block of ``name`` with ``args`` as its input (``x-mock-tool-call``)."""
    block = {"type": "tool_use", "id": f"toolu_{rid}", "name": name, "input": msgspec.json.decode(args)}
    message = {"id": f"msg_{rid}", "type": "message", "role": "assistant", "model": plan.model, "content": [block],
               "stop_reason": "tool_use", "stop_sequence": None,
               "usage": {"input_tokens": plan.prompt_tokens, "output_tokens": len(_pieces(args))}}
    if not stream:
        return encode(message)
    out = [_sse("message_start", {"type": "message_start", "message": {
               **message, "content": [], "stop_reason": None,
               "usage": {"input_tokens": plan.prompt_tokens, "output_tokens": 1}}}),
           _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {**block, "input": {}}})]
    out += [_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "input_json_delta", "partial_json": piece}})
            for piece in _pieces(args)]
    out += [_sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                   "usage": {"output_tokens": len(_pieces(args))}}),
            _sse("message_stop", {"type": "message_stop"})]
    return b"".join(out)
