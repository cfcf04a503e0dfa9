"""The scripted model's Chat Completions face: its decisions streamed as OpenCode reads them.

A chat request is read through its Responses view
(:mod:`harness.evidence.chat_requests`), decided by the one rule engine
(:mod:`harness.model.rules`), and the decision's output items are streamed by
:func:`chunks` as ``chat.completion.chunk`` events: messages' text as content,
function calls as ``tool_calls`` (named back ``<server>_<tool>``), then the
finish reason and a usage stand-in.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from harness.evidence.chat_requests import tool_name

def chunks(response_id: str, model: Any, items: Sequence[Mapping[str, Any]], *,
           usage: Mapping[str, int] | None = None, created: int = 0) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` events that stream ``items`` (a decision's Responses output items)."""
    base = {"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model}
    texts = [part.get("text") or "" for item in items if item.get("type") == "message"
             for part in item.get("content") or [] if isinstance(part, Mapping)]
    calls = [item for item in items if item.get("type") == "function_call"]
    delta: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) if texts else ""}
    yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    for index, call in enumerate(calls):
        yield {**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [{
            "index": index, "id": call.get("call_id"), "type": "function",
            "function": {"name": tool_name(call.get("namespace"), str(call.get("name"))),
                         "arguments": call.get("arguments") or "{}"}}]}}]}
    usage = usage or {}
    prompt, completion = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}],
           "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                     "prompt_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)}}}
