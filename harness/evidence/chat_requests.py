"""Chat Completions requests (OpenCode's) read as the Responses items every reader reads.

OpenCode talks to an OpenAI-compatible provider (``@ai-sdk/openai-compatible``)
with ``POST .../chat/completions`` and ``stream: true``. The scripted model's
rules and the checks read a model request as Responses ``input`` items; this
module gives a chat request that view, and decides nothing (the scripted
model's answer side is :mod:`harness.model.chat`):

* :func:`responses_view` turns a chat request's ``messages`` into Responses
  ``input`` items: system and user messages become messages of that role, an
  assistant message its text (a message) and its ``tool_calls``
  (``function_call`` items), a ``tool`` message a ``function_call_output``.
  OpenCode names an MCP tool ``<server>_<tool>`` (each part with anything
  outside ``[A-Za-z0-9_-]`` made ``_``); a rule names it by namespace
  ``mcp__<server>`` and tool. The known servers (:func:`servers_of`) tell
  where the server part ends.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

CHAT_ROUTE_SUFFIX = "/v1/chat/completions"
NAMESPACE_PREFIX = "mcp__"
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(namespace: str | None, name: str) -> str:
    """The name OpenCode gives the tool ``name`` of MCP namespace ``namespace`` (``mcp__peerwire``)."""
    if not namespace:
        return name
    return f"{_UNSAFE.sub('_', namespace.removeprefix(NAMESPACE_PREFIX))}_{_UNSAFE.sub('_', name)}"


def split_tool(chat_name: str, servers: Sequence[str]) -> tuple[str | None, str]:
    """(namespace, tool) of an OpenCode tool name: a known server's prefix (longest first), else no namespace."""
    for server in sorted(servers, key=len, reverse=True):
        prefix = _UNSAFE.sub("_", server) + "_"
        if chat_name.startswith(prefix) and len(chat_name) > len(prefix):
            return NAMESPACE_PREFIX + server, chat_name[len(prefix):]
    return None, chat_name


def servers_of(namespaces: Iterable[str]) -> list[str]:
    """The MCP servers of namespaces ``mcp__<server>``."""
    return sorted({ns.removeprefix(NAMESPACE_PREFIX) for ns in namespaces if ns.startswith(NAMESPACE_PREFIX)})


def _text(content: Any) -> Any:
    """A chat message's content as Responses content: a string stays one, parts keep their text."""
    if isinstance(content, list):
        return [{"type": "input_text", "text": part["text"]} for part in content
                if isinstance(part, Mapping) and isinstance(part.get("text"), str)]
    return content if isinstance(content, str) else ""


def responses_view(body: Mapping[str, Any], servers: Sequence[str], *, session: str | None = None) -> dict[str, Any]:
    """The Responses-shaped body the rules read for a chat ``body`` (``session``: OpenCode's session id,
    which keeps generated call ids apart between sessions, as Codex's ``prompt_cache_key`` does)."""
    items: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": str(message.get("tool_call_id")),
                          "output": _text(message.get("content"))})
            continue
        content = _text(message.get("content"))
        if role != "assistant" or content:
            items.append({"type": "message", "role": role, "content": content})
        for call in message.get("tool_calls") or [] if role == "assistant" else []:
            function = call.get("function") or {} if isinstance(call, Mapping) else {}
            namespace, name = split_tool(str(function.get("name") or ""), servers)
            item = {"type": "function_call", "call_id": str(call.get("id")), "name": name,
                    "arguments": function.get("arguments") or "{}"}
            if namespace:
                item["namespace"] = namespace
            items.append(item)
    tools = [_tool(tool, servers) for tool in body.get("tools") or [] if isinstance(tool, Mapping)]
    view: dict[str, Any] = {"model": body.get("model"), "input": items, "tools": tools}
    if session:
        view["prompt_cache_key"] = session
    return view


def _tool(tool: Mapping[str, Any], servers: Sequence[str]) -> dict[str, Any]:
    function = tool.get("function") or {}
    namespace, name = split_tool(str(function.get("name") or ""), servers)
    return {"type": "function", "name": name, **({"namespace": namespace} if namespace else {})}


def is_chat(path: str) -> bool:
    return path.endswith(CHAT_ROUTE_SUFFIX)


def session_of(headers: Mapping[str, str]) -> str | None:
    """OpenCode's session id, which it sends with each model request (``x-session-id``)."""
    return headers.get("x-session-id") or None
