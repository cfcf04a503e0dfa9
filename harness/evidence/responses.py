"""Responses API items as Codex sends them to a model and records them in rollouts: their text.

A message's ``content`` and a tool output's ``output`` are either a plain string
or a list of parts (``{"type": "input_text" | "output_text", "text": ...}``);
Codex renders MCP results both ways (a string when the result has
``structuredContent``). Tool output text often starts with lines such as
``Wall time: ...`` / ``Output:`` before the JSON it carries.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any


def content_text(content: Any) -> str:
    """The text of a ``content`` or ``output`` value: the string itself, or its text parts joined by line breaks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content
                         if isinstance(part, Mapping) and isinstance(part.get("text"), str))
    return ""


MAIL_TYPES = ("message", "agent_message")
"""Item types that carry text in ``content``: messages, and the native agent messages one agent sends another
(``author``, ``recipient``; an ``encrypted_content`` part has no text here)."""


def item_text(item: Mapping[str, Any]) -> str:
    """The text of a Responses item: a message's or agent message's content, or a tool output's output."""
    return content_text(item.get("content") if item.get("type") in MAIL_TYPES else item.get("output"))


def is_incoming(item: Any) -> bool:
    """Whether an input item is text the model did not write: a user or developer message, or an agent message."""
    return isinstance(item, Mapping) and (item.get("type") == "agent_message"
                                          or (item.get("type") == "message" and item.get("role") != "assistant"))


def json_objects(text: str) -> Iterator[Any]:
    """Every JSON object embedded in ``text``, in order."""
    decoder = json.JSONDecoder()
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            yield value
        position = text.find("{", end)
