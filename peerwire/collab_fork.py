"""What a collaboration child inherits from its parent: history, role, model and tools (no I/O here).

History comes from the parent's rollout, which records every Responses item
its model saw, turn by turn (a turn starts at each ``task_started`` event).
``spawn_agent``'s ``fork_turns`` selects ``all`` of it or the latest N turns
that began with user input, and the copy follows four rules:

* collaboration mail is not inherited: native agent messages, and user
  messages that are collaboration envelopes (tasks, messages and final answers
  the parent received); the child has a mailbox of its own;
* the parent's collaboration role instructions (a developer message opening
  with :data:`ROLE_HEADER`) are left out: the child's thread starts with its own
  (:func:`role_instructions`);
* a tool call is kept only together with its result, the result after it; a
  call still in flight (the parent's own ``spawn_agent``, typically) and a
  result whose call is not kept are dropped, so a fork never shows the
  parent's unfinished call as completed;
* nothing from the parent's spawn call on: when the call's id is known, the
  history ends before it, however far Codex had written the rollout when it
  was read (the call's result, or later items, may already be there);
* everything else is copied as recorded, minus the parent's internal turn
  attribution (it names a turn of another thread).

A child also inherits the model and reasoning effort of the parent's latest
turn, and the tools of its tree: the built-in coding tools and the
collaboration server, but none of the parent's other MCP servers unless the
operator names them (:func:`child_settings`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from .collab import ROOT
from .envelope import TYPE_HEADER

ROLE_HEADER = "Collaboration role:"
CALLS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
"""Tool call item types and the type of the result that completes each."""
_INTERNAL = "internal_chat_message_metadata_passthrough"


def role_instructions(path: str) -> str:
    """The developer instructions of the agent at ``path`` in its tree (its thread's ``developerInstructions``)."""
    if path == ROOT:
        return (f"{ROLE_HEADER} you are {ROOT}, the root of a tree of agents. Delegate work with spawn_agent; each "
                "child's final answer comes back to you as a FINAL_ANSWER message, and wait_agent waits for mail "
                "or the user.")
    parent = path.rsplit("/", 1)[0]
    return (f"{ROLE_HEADER} you are {path}, a child of {parent}. Do the task you were given; your final answer "
            f"goes to {parent}. Ask {parent} with send_message when you need to, and wait_agent for its answer.")


def turns(records: Iterable[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """The response items of a rollout's records, turn by turn."""
    out: list[list[dict[str, Any]]] = []
    for record in records:
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        if record.get("type") == "event_msg" and payload.get("type") == "task_started":
            out.append([])
        elif record.get("type") == "response_item":
            if not out:
                out.append([])
            out[-1].append(payload)
    return out


def _text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def is_envelope(text: str) -> bool:
    """Whether ``text`` is a collaboration envelope (``Message Type: ...`` then ``Task name: /root...``)."""
    lines = text.split("\n", 2)
    return len(lines) >= 2 and lines[0].startswith(f"{TYPE_HEADER}: ") and lines[1].startswith(f"Task name: {ROOT}")


def is_mail(item: Mapping[str, Any]) -> bool:
    """Collaboration mail the parent received: a native agent message, or a user message that is an envelope."""
    if item.get("type") == "agent_message":
        return True
    return item.get("type") == "message" and item.get("role") == "user" and is_envelope(_text(item))


def is_role(item: Mapping[str, Any]) -> bool:
    """The parent's collaboration role instructions (a developer message carrying :data:`ROLE_HEADER`)."""
    return item.get("type") == "message" and item.get("role") == "developer" and any(
        part.get("text", "").startswith(ROLE_HEADER) for part in item.get("content") or [] if isinstance(part, dict))


def _user_turn(turn: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the turn began with user input: a user message that is neither mail nor context Codex added
    (``<environment_context>`` and the like)."""
    return any(item.get("type") == "message" and item.get("role") == "user" and not is_mail(item)
               and not _text(item).lstrip().startswith("<") for item in turn)


def fork_history(records: Iterable[Mapping[str, Any]], keep: str | int,
                 until_call: str | None = None) -> list[dict[str, Any]]:
    """The items a child inherits from a parent whose rollout holds ``records`` (see the module's rules).

    ``keep``: ``all``, ``none`` or the number of latest turns that began with user input. ``until_call``:
    the id of the parent's spawn call; the history stops before that call.
    """
    if keep == "none":
        return []
    if until_call is not None:
        records = list(records)
        cut = next((n for n, r in enumerate(records) if isinstance(r.get("payload"), dict)
                    and r["payload"].get("call_id") == until_call), None)
        records = records if cut is None else records[:cut]
    selected = turns(records)
    if isinstance(keep, int):
        selected = [turn for turn in selected if _user_turn(turn)][-keep:]
    items = [item for turn in selected for item in turn if not is_mail(item) and not is_role(item)]
    # A result counts only after its call; a call counts only with a result after it.
    called: dict[str, str] = {}
    completed: set[str] = set()
    for item in items:
        call_id = item.get("call_id")
        if item.get("type") in CALLS and isinstance(call_id, str):
            called[call_id] = CALLS[item["type"]]
        elif isinstance(call_id, str) and called.get(call_id) == item.get("type"):
            completed.add(call_id)
    outputs = set(CALLS.values())
    kept = [item for item in items
            if (item.get("type") not in CALLS and item.get("type") not in outputs) or item.get("call_id") in completed]
    return [{k: v for k, v in item.items() if k != _INTERNAL} for item in kept]


def latest_settings(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The model and reasoning effort of the parent's latest turn (its last ``turn_context``), where recorded."""
    found: dict[str, str] = {}
    for record in records:
        payload = record.get("payload")
        if record.get("type") == "turn_context" and isinstance(payload, dict):
            found = {k: v for k, v in (("model", payload.get("model")), ("effort", payload.get("effort")))
                     if isinstance(v, str) and v}
    return found


def child_settings(path: str, inherited: Mapping[str, str], servers: Sequence[str], tree_servers: Sequence[str],
                   allowed: Sequence[str] = ()) -> dict[str, Any]:
    """The ``thread/start`` parameters of the child at ``path``: its role, the parent's model and effort, and
    every MCP server of the home turned off except the tree's own (``tree_servers``) and those ``allowed``."""
    settings: dict[str, Any] = {"developerInstructions": role_instructions(path)}
    config: dict[str, Any] = {}
    if inherited.get("model"):
        settings["model"] = inherited["model"]
    if inherited.get("effort"):
        config["model_reasoning_effort"] = inherited["effort"]
    for name in servers:
        if name not in tree_servers and name not in allowed:
            config[f"mcp_servers.{name}.enabled"] = False
    if config:
        settings["config"] = config
    return settings
