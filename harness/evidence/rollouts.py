"""An index over Codex rollout files: threads, turns, tool calls, messages, by file and line.

A rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``) has one JSON object a
line: ``{"timestamp", "ordinal", "type", "payload"}``. The index reads the types the
report binds evidence to (see ``docs/codex-protocol.md``):

* ``session_meta`` — the thread (its ``id``), ``cli_version``, originator, provider, and
  ``forked_from_id`` for a thread forked from another (``thread/fork``);
* ``turn_context`` — a turn's ``model`` and ``effort`` (absent when not configured);
* ``event_msg`` ``task_started`` / ``task_complete`` (``last_agent_message``, ``error``
  on a failed turn) / ``turn_aborted`` (``reason``) / ``item_completed`` (``McpToolCall``);
* ``response_item`` — ``message`` (role, phase), ``function_call`` (``namespace``,
  ``name``, ``arguments``, ``call_id``) and ``function_call_output`` (same ``call_id``).

Every fact keeps its :class:`Location` (file label and 1-based line number), so a
report can point a reader at the exact line. Lines that are not JSON objects (a run
cut off mid-write) are listed in :attr:`RolloutIndex.problems`, never raised.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.evidence import stored
from harness.json_values import strings
from harness.evidence.responses import content_text, item_text

UNVERIFIED = "unverified"
"""What the index says for a model or effort the rollout does not record."""

_CLOCK_SLACK_S = 0.005
"""Rollout timestamps have millisecond precision; a record written just after an instant may
carry a stamp up to a millisecond before it."""


@dataclass(frozen=True, order=True)
class Location:
    """One line of one rollout file; ``str()`` gives ``file:line``."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Thread:
    """One Codex thread (session) and the rollout lines that describe it."""

    thread_id: str
    files: list[str] = field(default_factory=list)
    session_meta: Location | None = None
    cli_version: str | None = None
    originator: str | None = None
    model_provider: str | None = None
    forked_from: str | None = None
    turn_ids: list[str] = field(default_factory=list)


@dataclass
class Turn:
    """One turn of a thread.

    ``status`` is ``completed`` (``task_complete`` without error), ``failed``
    (``task_complete`` with an ``error``), ``interrupted`` or ``aborted``
    (``turn_aborted``; the reason is kept in ``abort_reason``), ``incomplete``
    (started, no end line: the run stopped first) or ``context_only`` (a
    ``turn_context`` without ``task_started``, e.g. the pseudo-turn Codex records
    for items injected while idle). ``model``/``effort`` are :data:`UNVERIFIED`
    when no ``turn_context`` of the turn names them.
    """

    thread_id: str
    turn_id: str
    model: str = UNVERIFIED
    effort: str = UNVERIFIED
    status: str = "context_only"
    trigger: str | None = None
    parent_turn_id: str | None = None
    context: Location | None = None
    started: Location | None = None
    ended: Location | None = None
    started_at: str | None = None
    ended_at: str | None = None
    final_message: str | None = None
    error: str | None = None
    abort_reason: str | None = None


@dataclass
class ToolCall:
    """A ``function_call`` and what became of it.

    ``output`` is the ``function_call_output`` as Codex recorded it (a string, or a
    list of content parts); ``None`` with ``output_at`` ``None`` when the rollout has
    no output for the call (an interrupted turn). ``mcp_status`` comes from the
    ``McpToolCall`` ``item_completed`` event when there is one.
    """

    call_id: str
    namespace: str | None
    name: str
    arguments: str
    thread_id: str
    turn_id: str | None
    call: Location
    called_at: str | None = None
    output: Any = None
    output_at: Location | None = None
    mcp_completed: Location | None = None
    mcp_status: str | None = None

    def parsed_arguments(self) -> Any:
        """The arguments as JSON, or the raw string when they do not parse."""
        try:
            return json.loads(self.arguments)
        except (TypeError, ValueError):
            return self.arguments

    @property
    def tool(self) -> str:
        """``namespace/name`` for namespaced tools, else the bare name."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class Message:
    """A ``response_item`` message: user, developer or assistant (with its phase)."""

    thread_id: str
    turn_id: str | None
    role: str
    phase: str | None
    text: str
    item_id: str | None
    at: Location
    timestamp: str | None


@dataclass(frozen=True)
class Occurrence:
    """Where a searched text was found: the line, its record type and payload type."""

    at: Location
    record_type: str
    payload_type: str | None
    thread_id: str | None
    turn_id: str | None


@dataclass(frozen=True)
class RolloutLine:
    """One record of a rollout file, where it is, and the thread and turns it belongs to.

    ``turn_id`` is the turn Codex attributes the record to: its own ``turn_id``, the
    turn stamped into a response item's metadata (items injected while idle carry a
    pseudo-turn, see :class:`Turn` ``context_only``), else the latest turn seen.
    ``running_turn_id`` is the turn that was running when the line was written: set
    only between a ``task_started`` and that turn's ``task_complete`` /
    ``turn_aborted`` in the same file, so a line written while the thread was idle
    has none.
    """

    at: Location
    timestamp: str | None
    record_type: str
    payload: dict[str, Any]
    thread_id: str | None
    turn_id: str | None
    running_turn_id: str | None = None

    @property
    def payload_type(self) -> str | None:
        return self.payload.get("type")

    def text(self) -> str:
        """A message's text parts joined by line breaks, or a tool output's text."""
        return item_text(self.payload)


class RolloutIndex:
    """Threads, turns, tool calls and messages of a set of rollout files."""

    def __init__(self) -> None:
        self.threads: dict[str, Thread] = {}
        self.turns: dict[tuple[str, str], Turn] = {}
        self.calls: dict[str, ToolCall] = {}
        self.messages: list[Message] = []
        self.problems: list[str] = []
        self._lines: list[RolloutLine] = []
        self._by_location: dict[Location, RolloutLine] = {}
        self._decoded: dict[Location, list[str]] = {}
        # Outputs read before their call: files are indexed in the order given, and a
        # resumed thread may continue in a later file than its calls.
        self._pending_outputs: dict[str, list[tuple[RolloutLine, Any]]] = {}

    # -- loading -------------------------------------------------------------------

    @classmethod
    def load(cls, paths: Iterable[str | os.PathLike[str]], *, root: str | os.PathLike[str] | None = None
             ) -> "RolloutIndex":
        """Index ``paths`` in the order given (sort them for a stable index).

        Each file is labelled by its path relative to ``root`` (POSIX separators),
        or by its path as given without ``root`` (a path outside ``root`` raises
        ``ValueError``); a file a report stores compressed is read and labelled as the run wrote it
        (:mod:`harness.evidence.stored`). A file without ``session_meta`` is still indexed; its
        lines belong to no thread until one is seen and are listed in ``problems``.
        """
        index = cls()
        for path in paths:
            path = Path(path)
            label = stored.cited_name(path.relative_to(root).as_posix() if root is not None else path.as_posix())
            with stored.open_text(path, errors="replace") as handle:
                index._read(label, handle)
        return index

    def _read(self, label: str, lines: Iterable[str]) -> None:
        thread_id: str | None = None
        current_turn: str | None = None
        running_turn: str | None = None
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            at = Location(label, number)
            try:
                record = json.loads(raw)
            except ValueError as exc:
                self.problems.append(f"{at}: not JSON ({exc.msg})")
                continue
            if not isinstance(record, dict) or not isinstance(record.get("payload"), dict):
                self.problems.append(f"{at}: not a rollout record")
                continue
            kind = str(record.get("type"))
            payload: dict[str, Any] = record["payload"]
            stamp = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
            if kind == "session_meta":
                thread_id = str(payload.get("id") or payload.get("session_id"))
                self._thread(thread_id, label, at, payload)
            turn_id = _turn_of(kind, payload) or current_turn
            if kind == "event_msg" and payload.get("type") == "task_started":
                current_turn = running_turn = turn_id
            elif kind == "turn_context":
                current_turn = turn_id
            line = RolloutLine(at, stamp, kind, payload, thread_id, turn_id, running_turn)
            self._lines.append(line)
            self._by_location[at] = line
            ended = kind == "event_msg" and payload.get("type") in ("task_complete", "turn_aborted")
            if ended:
                running_turn = None
            if thread_id is None:
                if kind != "session_meta":
                    self.problems.append(f"{at}: {kind} before any session_meta")
                continue
            self._index(line)
            if ended:
                current_turn = None

    def _thread(self, thread_id: str, label: str, at: Location, payload: dict[str, Any]) -> None:
        thread = self.threads.setdefault(thread_id, Thread(thread_id))
        if label not in thread.files:
            thread.files.append(label)
        if thread.session_meta is None:
            thread.session_meta = at
        thread.cli_version = thread.cli_version or payload.get("cli_version")
        thread.originator = thread.originator or payload.get("originator")
        thread.model_provider = thread.model_provider or payload.get("model_provider")
        thread.forked_from = thread.forked_from or payload.get("forked_from_id")

    def _turn(self, thread_id: str, turn_id: str) -> Turn:
        key = (thread_id, turn_id)
        if key not in self.turns:
            self.turns[key] = Turn(thread_id, turn_id)
            self.threads[thread_id].turn_ids.append(turn_id)
        return self.turns[key]

    def _index(self, line: RolloutLine) -> None:
        payload, kind, thread_id = line.payload, line.record_type, line.thread_id
        assert thread_id is not None
        ptype = payload.get("type")
        if kind == "turn_context" and line.turn_id:
            turn = self._turn(thread_id, line.turn_id)
            turn.context = turn.context or line.at
            if payload.get("model"):
                turn.model = str(payload["model"])
            if payload.get("effort"):
                turn.effort = str(payload["effort"])
        elif kind == "event_msg" and ptype == "task_started" and line.turn_id:
            turn = self._turn(thread_id, line.turn_id)
            turn.started, turn.started_at, turn.status = line.at, line.timestamp, "incomplete"
            attribution = payload.get("turn_attribution") or {}
            turn.trigger = attribution.get("turn_trigger")
            turn.parent_turn_id = attribution.get("parent_turn_id")
        elif kind == "event_msg" and ptype in ("task_complete", "turn_aborted") and self._inherited(line):
            # Forking a thread mid-turn closes the parent's turn in the fork's history: that
            # turn is the parent's, not one the forked thread ran.
            return
        elif kind == "event_msg" and ptype == "task_complete" and line.turn_id:
            turn = self._turn(thread_id, line.turn_id)
            turn.ended, turn.ended_at = line.at, line.timestamp
            turn.final_message = payload.get("last_agent_message")
            error = payload.get("error")
            turn.status = "failed" if error else "completed"
            if error:
                turn.error = error.get("message") if isinstance(error, dict) else str(error)
        elif kind == "event_msg" and ptype == "turn_aborted" and line.turn_id:
            turn = self._turn(thread_id, line.turn_id)
            turn.ended, turn.ended_at = line.at, line.timestamp
            turn.abort_reason = payload.get("reason")
            turn.status = "interrupted" if turn.abort_reason == "interrupted" else "aborted"
        elif kind == "event_msg" and ptype == "item_completed":
            item = payload.get("item") or {}
            if item.get("type") == "McpToolCall" and item.get("id") in self.calls:
                call = self.calls[item["id"]]
                call.mcp_completed, call.mcp_status = line.at, item.get("status")
        elif kind == "response_item" and ptype == "function_call" and payload.get("call_id"):
            call_id = str(payload["call_id"])
            if call_id in self.calls:
                self.problems.append(f"{line.at}: call_id {call_id} already recorded at {self.calls[call_id].call}")
                return
            self.calls[call_id] = ToolCall(
                call_id=call_id, namespace=payload.get("namespace"), name=str(payload.get("name")),
                arguments=str(payload.get("arguments", "")), thread_id=thread_id, turn_id=line.turn_id,
                call=line.at, called_at=line.timestamp)
            for output_line, output in self._pending_outputs.pop(call_id, []):
                self._attach_output(call_id, output_line, output)
        elif kind == "response_item" and ptype == "function_call_output" and payload.get("call_id"):
            call_id = str(payload["call_id"])
            if call_id in self.calls:
                self._attach_output(call_id, line, payload.get("output"))
            else:
                self._pending_outputs.setdefault(call_id, []).append((line, payload.get("output")))
        elif kind == "response_item" and ptype == "message":
            self.messages.append(Message(
                thread_id=thread_id, turn_id=line.turn_id, role=str(payload.get("role")),
                phase=payload.get("phase"), text=content_text(payload.get("content")),
                item_id=payload.get("id"), at=line.at, timestamp=line.timestamp))

    def _inherited(self, line: RolloutLine) -> bool:
        thread = self.threads[str(line.thread_id)]
        return bool(thread.forked_from and line.turn_id and (thread.thread_id, line.turn_id) not in self.turns)

    def _attach_output(self, call_id: str, line: RolloutLine, output: Any) -> None:
        call = self.calls[call_id]
        if call.output_at is None:
            call.output, call.output_at = output, line.at

    # -- questions -----------------------------------------------------------------

    def thread_turns(self, thread_id: str) -> list[Turn]:
        """The turns of a thread in rollout order (empty for an unknown thread)."""
        thread = self.threads.get(thread_id)
        return [self.turns[(thread_id, t)] for t in thread.turn_ids] if thread else []

    def turn(self, thread_id: str, turn_id: str) -> Turn | None:
        return self.turns.get((thread_id, turn_id))

    def find_turn(self, turn_id: str) -> Turn | None:
        """The turn with this id in any thread (turn ids are unique across threads)."""
        for (_thread, tid), turn in self.turns.items():
            if tid == turn_id:
                return turn
        return None

    def why_cut(self, turn_id: str | None, since: float | None) -> str | None:
        """Why Codex may have hung up on a model request of ``turn_id`` that arrived at ``since``
        (Unix seconds), as the rollouts tell it, or ``None`` when they do not explain it.

        Codex closes a turn's in-flight request when the turn is interrupted or aborted, when
        its process stops first (the turn never ends: ``incomplete``), and when input is steered
        into the turn while the request is in flight (a user message of that turn recorded at or
        after the request arrived; Codex then asks again with it). A request cut in a turn that
        ran on and completed without any of these is unexplained: an answer went missing."""
        turn = self.find_turn(turn_id) if turn_id else None
        if turn is None:
            return None
        if turn.status in ("interrupted", "aborted", "incomplete"):
            return turn.status
        if since is None:
            return None
        for message in self.messages:
            stamp = parse_time(message.timestamp)
            if (message.turn_id == turn_id and message.role == "user" and stamp is not None
                    and stamp.timestamp() >= since - _CLOCK_SLACK_S):
                return "steered"
        return None

    def call(self, call_id: str) -> ToolCall | None:
        return self.calls.get(call_id)

    def lines(self, *, thread_id: str | None = None) -> list[RolloutLine]:
        """Every record read, file by file in the order given, line by line (of one thread when given)."""
        if thread_id is None:
            return list(self._lines)
        return [line for line in self._lines if line.thread_id == thread_id]

    def line(self, at: Location | None) -> RolloutLine | None:
        """The record at ``at`` (``None`` for no location or a line that was not a record)."""
        return self._by_location.get(at) if at is not None else None

    def tool_calls(self, *, thread_id: str | None = None, name: str | None = None,
                   namespace: str | None = None) -> list[ToolCall]:
        """Tool calls in rollout order, optionally filtered by thread, name and namespace."""
        return [c for c in self.calls.values()
                if (thread_id is None or c.thread_id == thread_id)
                and (name is None or c.name == name)
                and (namespace is None or c.namespace == namespace)]

    def final_messages(self, thread_id: str | None = None) -> list[tuple[Turn, str]]:
        """``(turn, last_agent_message)`` of every ended turn that has one, in rollout order."""
        threads = [thread_id] if thread_id is not None else list(self.threads)
        out = []
        for tid in threads:
            for turn in self.thread_turns(tid):
                if turn.final_message is not None:
                    out.append((turn, turn.final_message))
        return out

    def message(self, item_id: str) -> Message | None:
        """The message ``response_item`` with this item id (e.g. a final answer's ``msg_…``)."""
        for message in self.messages:
            if message.item_id == item_id:
                return message
        return None

    def occurrences(self, text: str, *, thread_id: str | None = None,
                    record_types: Iterable[str] | None = None) -> list[Occurrence]:
        """Every line on which some string value of the record contains ``text``.

        Values are compared decoded (after JSON parsing), so escaping in the file
        does not matter. Also looks inside JSON strings that are themselves JSON
        (tool ``arguments``, MCP result texts). An empty ``text`` matches nothing.
        """
        if not text:
            return []
        wanted = set(record_types) if record_types is not None else None
        out = []
        for line in self._lines:
            if thread_id is not None and line.thread_id != thread_id:
                continue
            if wanted is not None and line.record_type not in wanted:
                continue
            if any(text in s for s in self._strings_of(line)):
                out.append(Occurrence(line.at, line.record_type, line.payload.get("type"),
                                      line.thread_id, line.turn_id))
        return out

    def _strings_of(self, line: RolloutLine) -> list[str]:
        # Decoding embedded JSON is the costly part of a search; do it once per line.
        cached = self._decoded.get(line.at)
        if cached is None:
            cached = self._decoded[line.at] = list(_strings(line.payload))
        return cached

    def timestamp(self, at: Location) -> datetime | None:
        """The ``timestamp`` of the record at ``at`` (``None`` if unknown or unparsable)."""
        line = self._by_location.get(at)
        return parse_time(line.timestamp) if line else None


def parse_time(stamp: str | None) -> datetime | None:
    """An ISO-8601 UTC timestamp as Codex and peerwire write it (``…Z``), or ``None``."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _turn_of(kind: str, payload: dict[str, Any]) -> str | None:
    if kind in ("turn_context", "event_msg", "token_usage_record"):
        turn = payload.get("turn_id")
        return str(turn) if turn else None
    if kind == "response_item":
        # Codex stamps items of a turn with their turn; injected items between turns
        # carry the pseudo-turn of the context they were recorded in.
        passthrough = payload.get("internal_chat_message_metadata_passthrough") or {}
        turn = passthrough.get("turn_id")
        return str(turn) if turn else None
    return None


def _strings(value: Any) -> Iterator[str]:
    for text in strings(value):
        yield text
        stripped = text.lstrip()
        if stripped[:1] in ("{", "[") or "\n{" in text:
            yield from _embedded_json_strings(text)


def _embedded_json_strings(text: str) -> Iterator[str]:
    # Tool arguments and outputs are JSON inside a JSON string ("Wall time: …\nOutput:\n{…}").
    start = text.find("{") if not text.lstrip().startswith("[") else text.find("[")
    if start < 0:
        return
    try:
        inner = json.loads(text[start:])
    except ValueError:
        return
    if isinstance(inner, (dict, list)):
        yield from _strings(inner)
