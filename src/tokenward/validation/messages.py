"""Chat messages: bounded, normalized in place, attachments checked.

Walks ``messages`` once: the count against ``max_messages``, each content's parts
against ``max_content_parts``, each text against ``max_part_chars``; every text the
model reads is normalized (and replaced in the Struct when it changed); image, audio
and file parts go through ``media``. Parameter paths are only formatted when something
is refused or changed, keeping the walk cheap for plain ASCII chats.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from ..config.schema import PlanConfig
from ..errors import Reason, Refusal
from . import media
from .normalize import Normalizer
from .findings import Findings
from .schemas import AssistantMessage, AudioPart, FilePart, ImagePart, RefusalPart, TextPart


def too_long(param: str, cap: int) -> Refusal:
    return Refusal(Reason.invalid_field, f"{param} is longer than {cap} characters", param=param)


def too_many(param: str, cap: int, what: str) -> Refusal:
    return Refusal(Reason.invalid_field, f"{param}: at most {cap} {what}", param=param)


def check_messages(messages: list[Any], plan: PlanConfig, norm: Normalizer, findings: Findings) -> None:
    if len(messages) > plan.max_messages:
        raise too_many("messages", plan.max_messages, "messages")
    cap = plan.max_part_chars
    for i, message in enumerate(messages):
        content = message.content
        if type(content) is str:
            if len(content) > cap:
                raise too_long(f"messages[{i}].content", cap)
            if not content.isascii():
                new = norm.text(content, f"messages[{i}].content")
                if new is not content:
                    message.content = new
        elif content:  # a list of parts (None / UNSET only on assistant messages)
            _check_parts(content, i, plan, norm, findings)
        if type(message) is AssistantMessage:
            _check_assistant(message, i, plan)


def _check_parts(parts: list[Any], i: int, plan: PlanConfig, norm: Normalizer, findings: Findings) -> None:
    if len(parts) > plan.max_content_parts:
        raise too_many(f"messages[{i}].content", plan.max_content_parts, "content parts")
    cap = plan.max_part_chars
    for j, part in enumerate(parts):
        kind = type(part)
        if kind is TextPart:
            text = part.text
            if len(text) > cap:
                raise too_long(f"messages[{i}].content[{j}].text", cap)
            if not text.isascii():
                new = norm.text(text, f"messages[{i}].content[{j}].text")
                if new is not text:
                    part.text = new
        elif kind is ImagePart:
            param = f"messages[{i}].content[{j}].image_url.url"
            findings.attachments.append(media.image_part(part.image_url.url, param, plan))
        elif kind is AudioPart:
            param = f"messages[{i}].content[{j}].input_audio.data"
            findings.attachments.append(media.audio_part(part.input_audio.data, param, plan))
        elif kind is FilePart:
            attachment = _file(part, f"messages[{i}].content[{j}].file", plan)
            attachment.path = ("messages", i, "content", j)
            findings.attachments.append(attachment)
        elif kind is RefusalPart and len(part.refusal) > cap:
            raise too_long(f"messages[{i}].content[{j}].refusal", cap)


def _file(part: FilePart, param: str, plan: PlanConfig) -> media.Attachment:
    ref = part.file
    if ref.file_id is not UNSET:
        # A stored file the gateway cannot see: same rule as a remote URL.
        raise media.remote_denied(f"{param}.file_id")
    if ref.file_data is UNSET:
        raise Refusal(Reason.invalid_field, f"{param}: file_data is required", param=f"{param}.file_data")
    return media.file_part(ref.file_data, f"{param}.file_data", plan)


def _check_assistant(message: AssistantMessage, i: int, plan: PlanConfig) -> None:
    cap = plan.max_part_chars
    if isinstance(message.refusal, str) and len(message.refusal) > cap:
        raise too_long(f"messages[{i}].refusal", cap)
    calls = message.tool_calls
    if calls:
        if len(calls) > plan.max_tools:
            raise too_many(f"messages[{i}].tool_calls", plan.max_tools, "tool calls")
        for k, call in enumerate(calls):
            if len(call.function.arguments) > cap:
                raise too_long(f"messages[{i}].tool_calls[{k}].function.arguments", cap)
