"""An ACP agent's transcript read as its history: turns, messages and tool calls, line by line.

A Codex agent leaves a rollout; an ACP agent (OpenCode) keeps its history in a
database of its own, and what the harness has of its work is the core's ACP
transcript (``acp/<agent>.g<n>.acp.jsonl``, both directions of the JSON-RPC
session). That transcript holds everything a check reads of a rollout, in
other words:

* a **turn** is one ``session/prompt`` (its ``messageId`` is the turn id, set
  by the core) and ends with its answer (``stopReason``) or an error;
* the **prompt** itself is the user input of the turn: its text blocks;
* an **agent message** is the ``agent_message_chunk`` updates of one
  ``messageId`` (OpenCode's ``msg_…``); the last one with no tool call after it
  in a turn that ended ``end_turn`` is the turn's final answer, the others are
  commentary (:mod:`peerwire.acp.turns` decides the reply by the same rule);
* a **tool call** is a ``tool_call`` update and its ``tool_call_update``\\ s:
  ``title`` is the tool's name as the agent's model saw it (``peerwire_reply``),
  ``rawInput`` its arguments, and the update that completes or fails it carries
  its output (``rawOutput.output``, else its content text).

:class:`AcpHistory` gives each of those as an :class:`AcpLine`, a
:class:`~harness.evidence.rollouts.RolloutLine` whose location is the ACP
transcript line it was read from (``acp/B.g1.acp.jsonl:12``), so the same
checks read a Codex rollout and an ACP history and cite either. Updates a
running turn alone produces (messages, tool calls) that arrive outside every
prompt are kept apart as ``stray``: an agent that worked without being asked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from harness.names import TOOL_NAMESPACES

from .chat_requests import servers_of, split_tool
from .rollouts import RolloutLine
from .transcript_lines import TranscriptLine

TURN_ONLY_UPDATES = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"})
"""``session/update`` kinds only a running turn produces."""
TURN_STATUS = {"end_turn": "completed", "cancelled": "interrupted"}
"""A prompt's stop reason as a turn's end; any other, or an error answer, is ``failed``."""


@dataclass(frozen=True)
class AcpLine(RolloutLine):
    """A line of an ACP agent's history: a rollout line read from the ACP transcript line at ``at``."""

    wall: float | None = None
    """When the transcript line was written (Unix seconds)."""


@dataclass
class AcpTurn:
    """One prompt of an ACP agent: its lines, its answer, and how it ended."""

    turn_id: str
    session_id: str
    generation: int
    prompt: TranscriptLine
    answer: TranscriptLine | None = None
    cancels: list[TranscriptLine] = field(default_factory=list)
    """``session/cancel`` notifications sent while it ran."""

    @property
    def stop_reason(self) -> str | None:
        return ((self.answer.message.get("result") or {}).get("stopReason")) if self.answer else None

    @property
    def status(self) -> str:
        """``completed``, ``interrupted``, ``failed`` (another stop reason, or an error), ``incomplete``."""
        if self.answer is None:
            return "incomplete"
        return TURN_STATUS.get(self.stop_reason or "", "failed")

    @property
    def started_at(self) -> float | None:
        return self.prompt.wall

    @property
    def ended_at(self) -> float | None:
        return self.answer.wall if self.answer else None

    def blocks(self) -> list[str]:
        """The prompt's text blocks, in order."""
        return [block.get("text", "") for block in (self.prompt.message.get("params") or {}).get("prompt") or []
                if isinstance(block, Mapping) and block.get("type") == "text"]


@dataclass
class _Call:
    call_id: str
    name: str
    at: TranscriptLine
    arguments: Any = None
    output: str | None = None
    output_at: TranscriptLine | None = None
    failed: bool = False


class AcpHistory:
    """The history of one ACP agent, read from its transcript lines (every generation, in order)."""

    def __init__(self, entries: Sequence[TranscriptLine], *, servers: Sequence[str] | None = None):
        self.servers = list(servers if servers is not None else servers_of(TOOL_NAMESPACES))
        self.turns: list[AcpTurn] = []
        self.lines: list[AcpLine] = []
        self.stray: list[TranscriptLine] = []
        self.sessions: list[str] = []
        self.cancels: list[TranscriptLine] = []
        self._calls: list[tuple[AcpLine, AcpLine | None]] = []
        self._read(list(entries))

    # -- reading ----------------------------------------------------------------------------

    def _read(self, entries: list[TranscriptLine]) -> None:
        answers = {(e.generation, e.message.get("id")): e for e in entries
                   if e.dir == "received" and "id" in e.message and "method" not in e.message}
        requests: dict[tuple[int, Any], TranscriptLine] = {}
        current: AcpTurn | None = None
        replaying: set[tuple[int, Any]] = set()
        pending: list[tuple[TranscriptLine, Mapping[str, Any]]] = []
        for entry in entries:
            message, method = entry.message, entry.message.get("method")
            if entry.dir == "sent" and method is not None:
                requests[(entry.generation, message.get("id"))] = entry
                if method in ("session/new", "session/load"):
                    if method == "session/load":
                        replaying.add((entry.generation, message.get("id")))
                        self._session((message.get("params") or {}).get("sessionId"))
                elif method == "session/prompt":
                    if current is not None:
                        self._end(current, pending)
                    params = message.get("params") or {}
                    current = AcpTurn(str(params.get("messageId")), str(params.get("sessionId")), entry.generation,
                                      entry, answers.get((entry.generation, message.get("id"))))
                    self.turns.append(current)
                    pending = []
                    self._begin(current)
                elif method == "session/cancel":
                    self.cancels.append(entry)
                    if current is not None:
                        current.cancels.append(entry)
                continue
            if entry.dir != "received":
                continue
            if method is None and "id" in message:
                request = requests.get((entry.generation, message.get("id")))
                replaying.discard((entry.generation, message.get("id")))
                if request is not None and request.message.get("method") == "session/new":
                    self._session((message.get("result") or {}).get("sessionId"))
                if current is not None and current.answer is entry:
                    self._end(current, pending)
                    current, pending = None, []
                continue
            if method != "session/update":
                continue
            update = (message.get("params") or {}).get("update") or {}
            kind = update.get("sessionUpdate")
            if kind not in TURN_ONLY_UPDATES:
                continue
            if current is not None and (message.get("params") or {}).get("sessionId") == current.session_id \
                    and entry.generation == current.generation:
                pending.append((entry, update))
            elif not any(gen == entry.generation for gen, _ in replaying):
                self.stray.append(entry)  # a loaded session's replayed history belongs to no turn
        if current is not None:
            self._end(current, pending)

    def _session(self, session_id: Any) -> None:
        if isinstance(session_id, str) and session_id not in self.sessions:
            self.sessions.append(session_id)

    def _line(self, turn: AcpTurn, entry: TranscriptLine, record_type: str, payload: dict[str, Any]) -> AcpLine:
        return AcpLine(entry.location, _iso(entry.wall), record_type, payload, turn.session_id, turn.turn_id,
                       turn.turn_id, wall=entry.wall)

    def _begin(self, turn: AcpTurn) -> None:
        self._session(turn.session_id)
        self.lines.append(self._line(turn, turn.prompt, "event_msg", {"type": "task_started", "turn_id": turn.turn_id}))
        self.lines.append(self._line(turn, turn.prompt, "response_item", {
            "type": "message", "role": "user", "acp_prompt": True,
            "content": [{"type": "input_text", "text": text} for text in turn.blocks()]}))

    def _end(self, turn: AcpTurn, pending: list[tuple[TranscriptLine, Mapping[str, Any]]]) -> None:
        """Turn the updates of ``turn`` into lines (messages phased, tool calls and their outputs, then its end),
        each at the transcript line it was read from."""
        messages: dict[str, dict[str, Any]] = {}
        calls: dict[str, _Call] = {}
        order: list[tuple[str, str]] = []  # (kind, id) in the order first seen
        for entry, update in pending:
            kind = update.get("sessionUpdate")
            if kind == "agent_message_chunk":
                message_id = str(update.get("messageId") or entry.ref)
                if message_id not in messages:
                    messages[message_id] = {"at": entry, "text": ""}
                    order.append(("message", message_id))
                messages[message_id]["text"] += ((update.get("content") or {}).get("text")) or ""
            elif kind in ("tool_call", "tool_call_update"):
                call_id = str(update.get("toolCallId"))
                call = calls.get(call_id)
                if call is None:
                    call = calls[call_id] = _Call(call_id, str(update.get("title") or ""), entry)
                    order.append(("call", call_id))
                if update.get("title"):
                    call.name = str(update["title"])
                if update.get("rawInput"):
                    call.arguments = update["rawInput"]
                if update.get("status") in ("completed", "failed"):
                    call.output, call.output_at = _output_text(update), entry
                    call.failed = update.get("status") == "failed"
        last_call = max((index for index, (kind, _) in enumerate(order) if kind == "call"), default=-1)
        final_id = next((ident for index, (kind, ident) in reversed(list(enumerate(order)))
                         if kind == "message" and index > last_call), None) if turn.stop_reason == "end_turn" else None
        made: list[AcpLine] = []
        for kind, ident in order:
            if kind == "message":
                message = messages[ident]
                made.append(self._line(turn, message["at"], "response_item", {
                    "type": "message", "role": "assistant", "id": ident,
                    "phase": "final_answer" if ident == final_id else "commentary",
                    "content": [{"type": "output_text", "text": message["text"]}]}))
                continue
            call = calls[ident]
            namespace, name = split_tool(call.name, self.servers)
            payload = {"type": "function_call", "name": name, "call_id": call.call_id,
                       "arguments": json.dumps(call.arguments if call.arguments is not None else {},
                                               ensure_ascii=False)}
            if namespace:
                payload["namespace"] = namespace
            call_line = self._line(turn, call.at, "response_item", payload)
            made.append(call_line)
            output = None
            if call.output_at is not None:
                output = self._line(turn, call.output_at, "response_item", {
                    "type": "function_call_output", "call_id": call.call_id, "output": call.output or "",
                    "acp_failed": call.failed})
                made.append(output)
            self._calls.append((call_line, output))
        if turn.answer is not None:
            final = messages[final_id]["text"] if final_id else None
            if turn.status == "interrupted":
                made.append(self._line(turn, turn.answer, "event_msg", {
                    "type": "turn_aborted", "turn_id": turn.turn_id, "reason": "interrupted"}))
            else:
                error = None if turn.status == "completed" else (
                    (turn.answer.message.get("error") or {}).get("message") or f"stop reason {turn.stop_reason}")
                made.append(self._line(turn, turn.answer, "event_msg", {
                    "type": "task_complete", "turn_id": turn.turn_id, "last_agent_message": final, "error": error}))
        # In transcript order (one file a generation); lines read from one transcript line keep their order.
        self.lines += sorted(made, key=lambda line: line.at.line)

    # -- questions ----------------------------------------------------------------------------

    def tool_calls(self, name: str | None = None) -> list[tuple[AcpLine, AcpLine | None]]:
        """(function_call, function_call_output) of each tool call of a known MCP server, in order; ``name``
        filters by tool name."""
        return [(call, out) for call, out in self._calls if call.payload.get("namespace") in TOOL_NAMESPACES
                and (name is None or call.payload.get("name") == name)]

    def turn(self, turn_id: str) -> AcpTurn | None:
        return next((turn for turn in self.turns if turn.turn_id == turn_id), None)

    def turn_at(self, entry: TranscriptLine) -> AcpTurn | None:
        """The turn that was running when ``entry`` was written (same generation, between prompt and answer)."""
        for turn in self.turns:
            if turn.generation != entry.generation or entry.location.line < turn.prompt.location.line:
                continue
            if turn.answer is None or entry.location.line <= turn.answer.location.line:
                return turn
        return None


def _output_text(update: Mapping[str, Any]) -> str:
    raw = update.get("rawOutput")
    if isinstance(raw, Mapping):
        for key in ("output", "error"):
            if isinstance(raw.get(key), str):
                return raw[key]
    texts = [((part.get("content") or {}).get("text")) for part in update.get("content") or []
             if isinstance(part, Mapping) and isinstance(part.get("content"), Mapping)]
    return "\n".join(text for text in texts if isinstance(text, str))


def _iso(wall: float | None) -> str | None:
    return datetime.fromtimestamp(wall, timezone.utc).isoformat(timespec="milliseconds") if wall else None
