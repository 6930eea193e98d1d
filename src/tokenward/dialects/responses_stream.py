"""A chat-completions stream as Responses API events, sans-IO.

``ResponsesStream.feed(chunk)`` takes each chat chunk (a dict or the project's typed
``wire.chunks.Chunk``) and returns the bytes of the Responses events it makes;
``finish()`` closes the open items and writes ``response.completed`` (or
``response.incomplete`` when the output bound cut the answer) with usage;
``error(code, message)`` writes the in-band ``error`` event. Every event carries its
``sequence_number``; the order is the API's: ``response.created``,
``response.in_progress``, then per output item ``response.output_item.added``,
(``response.content_part.added``, ``response.output_text.delta``...,
``response.output_text.done``, ``response.content_part.done``) or
(``response.function_call_arguments.delta``..., ``.done``), ``response.output_item.done``.
"""

from __future__ import annotations

from typing import Any

from ..wire.chunks import Chunk
from .chat_answer import as_chunk
from .common import encode, new_id, sse
from .responses_schema import CustomTool, FlatTool, Parsed
from .responses_translate import (
    call_item,
    custom_input,
    finish_status,
    message_item,
    response_shell,
    tool_names,
    usage_object,
)


class _Item:
    __slots__ = ("index", "id", "kind", "parts", "call_id", "name", "open", "delta_head", "tool")

    def __init__(self, index: int, kind: str, call_id: str = "", name: str = "", tool: FlatTool | None = None) -> None:
        self.index = index
        self.id = new_id("msg" if kind == "message" else "ctc" if kind == "custom" else "fc")
        self.kind = kind
        self.parts: list[str] = []   # the message's text, or the call's arguments, as they came
        self.call_id = call_id
        self.name = name
        self.open = True
        self.tool = tool             # a namespace's member or a custom tool (named back)
        # what every delta event of this item repeats, encoded once (the event's fields in
        # the order the dict-built events have them)
        where = b'"item_id":' + encode(self.id) + b',"output_index":%d,' % index
        if kind == "message":
            self.delta_head = b'"type":"response.output_text.delta","sequence_number":%d,' + where + \
                b'"content_index":0,"delta":'
        else:
            self.delta_head = b'"type":"response.function_call_arguments.delta","sequence_number":%d,' + where + \
                b'"delta":'

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def snapshot(self, status: str) -> dict[str, Any]:
        if self.kind == "message":
            return message_item(self.id, self.text if status == "completed" else None, None, status)
        return call_item(self.id, self.call_id, self.name, self.text if status == "completed" else "", status,
                         self.tool)


_TEXT_DELTA = b"event: response.output_text.delta\ndata: {"
_ARGS_DELTA = b"event: response.function_call_arguments.delta\ndata: {"


class ResponsesStream:
    """One chat stream's translation; feed chunks in order, then ``finish()`` once."""

    def __init__(self, parsed: Parsed, *, response_id: str | None = None, created_at: int = 0,
                 max_output_tokens: int | None = None) -> None:
        self._shell = response_shell(parsed, response_id or new_id("resp"), created_at, "", max_output_tokens)
        self._seq = 0
        self._started = False
        self._items: list[_Item] = []
        self._calls: dict[int, _Item] = {}    # chat tool-call index -> its item
        self._finish_reason: str | None = None
        self._usage: object = None
        self._ended = False
        self._names = tool_names(parsed)   # chat name -> a flattened or custom tool
    def _event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return sse(kind, payload)

    def start(self) -> bytes:
        """``response.created`` and ``response.in_progress`` (once; ``feed`` calls it)."""
        if self._started:
            return b""
        self._started = True
        return (self._event("response.created", response=self._shell)
                + self._event("response.in_progress", response=self._shell))

    def feed(self, chunk: Chunk | dict[str, Any] | bytes) -> bytes:
        out = [b"" if self._started else self.start()]
        typed = as_chunk(chunk)
        if typed is None or self._ended:
            return out[0]
        if typed.usage is not None:
            self._usage = typed.usage
        for choice in typed.choices or ():
            if choice.index != 0:
                continue        # the translated request never asks for n > 1
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    out.append(self._text(delta.content))
                for call in delta.tool_calls or ():
                    out.append(self._call(call))
            if choice.finish_reason is not None:
                self._finish_reason = choice.finish_reason
        return b"".join(out)

    def _text(self, text: str) -> bytes:
        out = []
        last = self._items[-1] if self._items else None
        if last is None or last.kind != "message" or not last.open:
            out.append(self._close_all())
            last = _Item(len(self._items), "message")
            self._items.append(last)
            out.append(self._event("response.output_item.added", output_index=last.index,
                                   item=last.snapshot("in_progress")))
            out.append(self._event("response.content_part.added", item_id=last.id, output_index=last.index,
                                   content_index=0, part=_text_part("")))
        last.parts.append(text)
        out.append(_TEXT_DELTA + last.delta_head % self._seq + encode(text) + b',"logprobs":[]}\n\n')
        self._seq += 1
        return b"".join(out)

    def _call(self, call: Any) -> bytes:
        out = []
        item = self._calls.get(call.index)
        function = call.function
        if item is None:
            out.append(self._close_message())
            name = function.name if function is not None and function.name else ""
            tool = self._names.get(name)
            kind = "custom" if tool is not None and isinstance(tool.tool, CustomTool) else "function_call"
            item = _Item(len(self._items), kind, call.id or new_id("call"), name, tool)
            self._items.append(item)
            self._calls[call.index] = item
            out.append(self._event("response.output_item.added", output_index=item.index,
                                   item=item.snapshot("in_progress")))
        if function is not None and function.arguments:
            item.parts.append(function.arguments)
            if item.kind == "function_call":
                out.append(_ARGS_DELTA + item.delta_head % self._seq + encode(function.arguments) + b"}\n\n")
                self._seq += 1
            # a custom tool's input is the ``input`` of the arguments: written whole at its end
        return b"".join(out)

    def _close_message(self) -> bytes:
        last = self._items[-1] if self._items else None
        return self._close(last) if last is not None and last.kind == "message" else b""

    def _close_all(self) -> bytes:
        return b"".join(self._close(item) for item in self._items)

    def _close(self, item: _Item) -> bytes:
        if not item.open:
            return b""
        item.open = False
        if item.kind == "message":
            done = [self._event("response.output_text.done", item_id=item.id, output_index=item.index,
                                content_index=0, text=item.text, logprobs=[]),
                    self._event("response.content_part.done", item_id=item.id, output_index=item.index,
                                content_index=0, part=_text_part(item.text))]
        elif item.kind == "custom":
            text = custom_input(item.text)
            done = [self._event("response.custom_tool_call_input.delta", item_id=item.id, output_index=item.index,
                                delta=text),
                    self._event("response.custom_tool_call_input.done", item_id=item.id, output_index=item.index,
                                input=text)]
        else:
            done = [self._event("response.function_call_arguments.done", item_id=item.id,
                                output_index=item.index, arguments=item.text, name=item.snapshot("completed")["name"])]
        done.append(self._event("response.output_item.done", output_index=item.index,
                                item=item.snapshot("completed")))
        return b"".join(done)

    @property
    def usage(self) -> object:
        """The chat usage the stream reported (its last usage chunk), None until one came."""
        return self._usage

    def finish(self, usage: dict[str, Any] | None = None) -> bytes:
        """Close every open item and end the response (``usage``: a chat usage object that
        replaces the stream's own, e.g. the gateway's count when the backend sent none)."""
        if self._ended:
            return b""
        out = [self.start(), self._close_all()]
        self._ended = True
        shell = self._final_shell(usage if usage is not None else self._usage)
        kind = "response.incomplete" if shell["status"] == "incomplete" else "response.completed"
        out.append(self._event(kind, response=shell))
        return b"".join(out)

    def _final_shell(self, usage: object) -> dict[str, Any]:
        shell = dict(self._shell)
        shell["output"] = [item.snapshot("completed") for item in self._items]
        finish_status(shell, self._finish_reason)
        shell["usage"] = usage_object(usage)
        return shell

    def error(self, code: str, message: str, error_type: str = "api_error") -> bytes:
        """The in-band error that ends a started stream (the SDK raises it as an APIError)."""
        if self._ended:
            return b""
        self._ended = True
        return self.start() + self._event("error", code=code, message=message, param=None,
                                          error={"type": error_type, "code": code, "message": message})


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
