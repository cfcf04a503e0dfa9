"""A Mermaid ``sequenceDiagram`` of one exchange, rebuilt from what was recorded.

Participants: the first agent, ``core`` (the messaging core), ``adapter`` (its
Codex provider adapter), then the other agents. Steps come from

* the core export's evidence rows: admission of each record (send, followup, reply,
  notice), dispatch claims, ``turn/start`` / ``turn/steer`` acceptance, released
  claims, uncertainty, a bound turn's captured outcome and its publication,
  ``thread/inject_items`` delivery and receipt through ``receive_messages``;
* the rollouts, for what leaves no record in the core: operator prompts that
  start a turn, ``wait_agent`` and ``interrupt_agent`` calls, and the end of
  turns no binding covers.

Steps are ordered by their timestamps (evidence ``at``, rollout ``timestamp``),
ties kept in source order. Message texts are shortened and escaped so a body can
never break the diagram's syntax.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from harness.names import TOOL_NAMESPACES
from harness.evidence.core import CoreEvidence
from harness.evidence.rollouts import RolloutIndex, parse_time
from peerwire.lifecycle import Stage

LABEL_CHARS = 48
CORE, ADAPTER = "core", "adapter"
_EPOCH = datetime.min.replace(tzinfo=timezone.utc)
_SAFE_ID = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class Step:
    """One arrow or note. ``arrow`` is a Mermaid arrow (``->>``, ``-->>``) or ``note``."""

    at: datetime | None
    order: int
    source: str
    actor: str
    target: str
    arrow: str
    text: str

    def mermaid(self, ids: Mapping[str, str]) -> str:
        if self.arrow == "note":
            over = ids[self.actor] if self.actor == self.target else f"{ids[self.actor]},{ids[self.target]}"
            return f"    Note over {over}: {escape(self.text)}"
        return f"    {ids[self.actor]}{self.arrow}{ids[self.target]}: {escape(self.text)}"


class SequenceDiagram:
    """The steps of one scenario's exchange; :meth:`mermaid` renders them."""

    def __init__(self, participants: Sequence[str], steps: list[Step]):
        self.participants = list(participants)
        self.steps = sorted(steps, key=lambda s: (s.at or _EPOCH, s.order))

    @classmethod
    def build(cls, core: CoreEvidence | None, *, agents: Sequence[str], index: RolloutIndex | None = None,
              thread_agents: Mapping[str, str] | None = None) -> "SequenceDiagram":
        """Steps from a core's export (none without one) and, when given, the rollouts.

        ``agents`` orders the agent participants (the first is drawn left of the
        core); agents that appear in the export but not in ``agents`` are added after
        them. ``thread_agents`` maps rollout threads to agent names; without it no
        rollout step is drawn.
        """
        builder = _Builder(core, list(agents))
        if core is not None:
            builder.from_evidence(core)
        if index is not None and thread_agents:
            builder.from_rollouts(index, thread_agents)
        names = builder.agent_order()
        participants = [*names[:1], CORE, ADAPTER, *names[1:]]
        return cls(participants, builder.steps)

    def mermaid(self) -> str:
        ids = {name: _participant_id(name) for name in self.participants}
        lines = ["sequenceDiagram"]
        for name in self.participants:
            lines.append(f"    participant {ids[name]} as {escape(name)}")
        lines.extend(step.mermaid(ids) for step in self.steps)
        return "\n".join(lines) + "\n"

    def to_json(self) -> list[dict[str, Any]]:
        return [{"at": s.at.isoformat() if s.at else None, "source": s.source, "from": s.actor, "to": s.target,
                 "arrow": s.arrow, "text": s.text} for s in self.steps]


def shorten(text: str) -> str:
    """One line, at most :data:`LABEL_CHARS` characters (an ellipsis ends a shortened one)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= LABEL_CHARS else flat[: LABEL_CHARS - 1] + "…"


def escape(text: str) -> str:
    """One line of Mermaid-safe text: entity codes for ``#;<>``, no line breaks."""
    flat = shorten(text)
    out = []
    for ch in flat:
        if ch == "#":
            out.append("#35;")
        elif ch == ";":
            out.append("#59;")
        elif ch == "<":
            out.append("#lt;")
        elif ch == ">":
            out.append("#gt;")
        else:
            out.append(ch)
    return "".join(out)


def _participant_id(name: str) -> str:
    # Mermaid ids must be plain words; the display name goes after "as".
    return "p_" + _SAFE_ID.sub("_", name)


def _short(ident: str | None) -> str:
    """``ix_3ab966…`` style ids keep their prefix; UUIDs keep their tail (v7 UUIDs share a time prefix)."""
    if not ident:
        return "?"
    prefix, _, rest = ident.partition("_")
    return f"{prefix}_{rest[:6]}" if rest else f"…{ident[-6:]}"


def _quote(body: str | None) -> str:
    return json.dumps(" ".join((body or "").split()), ensure_ascii=False)


class _Builder:
    def __init__(self, core: CoreEvidence | None, agents: list[str]):
        self.agents = agents
        self.seen_agents: list[str] = []
        bindings = core.bindings if core else []
        agent_rows = core.agents if core else []
        self.bindings = {b["binding_id"]: b for b in bindings}
        self.agent_names = {a["agent_id"]: a["name"] for a in agent_rows}
        # Agents of a collaboration tree: they take their mail with wait_agent, and a spawned
        # child's first task is its parent's spawn_agent message.
        self.tree = {a["name"] for a in agent_rows if a.get("path")}
        self.spawned = {a["agent_id"] for a in agent_rows if a.get("source") == "spawn_agent"}
        self.first_tasks: dict[str | None, str] = {}
        for r in core.records if core else []:
            if r["kind"] == "task":
                self.first_tasks.setdefault(r["recipient"]["agent_id"], r["record_id"])
        self.steps: list[Step] = []
        self.bound_turns = {b.get("turn_id") for b in bindings}
        self.stages = {
            Stage.ADMITTED: self._admitted,
            Stage.CLAIM_BY_DISPATCH: self._dispatch_claimed,
            Stage.PROVIDER_ACCEPTED: self._provider_accepted,
            Stage.RELEASE: self._released,
            Stage.PROVIDER_UNCERTAIN: self._uncertain,
            Stage.OBSERVATION_LOST: self._uncertain,
            Stage.BINDING_CAPTURE: self._captured,
            Stage.BINDING_SUPPRESS: self._suppressed,
            Stage.PROVIDER_VISIBLE: self._made_visible,
            Stage.RECEIVED: self._received,
        }
        """The stages drawn, each by its step; other stages leave no arrow."""

    def agent_order(self) -> list[str]:
        return list(dict.fromkeys([*self.agents, *self.seen_agents]))

    def add(self, at: datetime | None, source: str, actor: str, target: str, arrow: str, text: str) -> None:
        for name in (actor, target):
            if name not in (CORE, ADAPTER) and name not in self.seen_agents:
                self.seen_agents.append(name)
        self.steps.append(Step(at, len(self.steps), source, actor, target, arrow, text))

    # -- the core's evidence rows ----------------------------------------------------------

    def from_evidence(self, core: CoreEvidence) -> None:
        for row in core.evidence_rows:
            record = core.record(row["record_id"])
            draw = self.stages.get(row["stage"])
            if record is None or draw is None:
                continue
            draw(parse_time(row.get("at")), f"evidence:{row.get('evidence_id')}", record, row.get("detail") or {})

    def _admitted(self, at, source, record, detail) -> None:
        kind, ident = record["kind"], _short(record["record_id"])
        sender, recipient = record["sender"]["name"], record["recipient"]["name"]
        receipt = record.get("tool_receipt")
        if kind == "information":
            self.add(at, source, sender, CORE, "->>", f"send_message to {recipient}: {_quote(record['body'])} "
                                                      f"({ident})")
        elif kind == "task":
            spawn = (record["recipient"]["agent_id"] in self.spawned
                     and self.first_tasks.get(record["recipient"]["agent_id"]) == record["record_id"])
            self.add(at, source, sender, CORE, "->>", f"{'spawn_agent' if spawn else 'followup_task to'} {recipient}: "
                                                      f"{_quote(record['body'])} ({_short(record.get('request_id'))})")
        elif kind == "reply" and receipt:
            self.add(at, source, sender, CORE, "->>", f"reply {record.get('status')} to "
                                                      f"{_short(record.get('request_id'))}: {_quote(record['body'])}")
        elif kind == "reply":
            origin = "turn outcome as reply" if detail.get("source") == "turn_outcome" else "peerwire reply"
            self.add(at, source, ADAPTER, CORE, "->>", f"{origin} {record.get('status')} to "
                                                       f"{_short(record.get('request_id'))}: {_quote(record['body'])}")
        else:
            self.add(at, source, CORE, CORE, "note", f"notice {record.get('code')} for {recipient} "
                                                     f"({ident})")

    def _dispatch_claimed(self, at, source, record, detail) -> None:
        self.add(at, source, CORE, ADAPTER, "->>", f"dispatch {_short(record.get('request_id'))} "
                                                   f"to {record['recipient']['name']}")

    def _provider_accepted(self, at, source, record, detail) -> None:
        via, turn = detail.get("via", "turn/start"), _short(detail.get("turn_id"))
        verb = "steer into" if via == "turn/steer" else "start"
        self.add(at, source, ADAPTER, record["recipient"]["name"], "->>",
                 f"{via} {_short(record.get('request_id'))} ({verb} turn {turn})")

    def _released(self, at, source, record, detail) -> None:
        self.add(at, source, ADAPTER, ADAPTER, "note", f"stale turn: claim of {_short(record.get('request_id'))} "
                                                       "released")

    def _uncertain(self, at, source, record, detail) -> None:
        self.add(at, source, ADAPTER, ADAPTER, "note", f"{_short(record['record_id'])} uncertain: "
                                                       f"{detail.get('reason') or detail.get('error') or ''}")

    def _captured(self, at, source, record, detail) -> None:
        binding = self.bindings.get(detail.get("binding_id"), {})
        agent = self.agent_names.get(binding.get("agent_id"), record["recipient"]["name"])
        self.add(at, source, agent, ADAPTER, "-->>", f"turn {_short(detail.get('turn_id'))} "
                                                     f"{detail.get('turn_status')}: {detail.get('reply_status')}")

    def _suppressed(self, at, source, record, detail) -> None:
        self.add(at, source, ADAPTER, ADAPTER, "note", f"explicit reply stands: outcome of "
                                                       f"{_short(record.get('request_id'))} suppressed")

    def _made_visible(self, at, source, record, detail) -> None:
        via = detail.get("via", "thread/inject_items")
        self.add(at, source, ADAPTER, record["recipient"]["name"], "->>",
                 f"{via}: {record['kind']} {_short(record['record_id'])}")

    def _received(self, at, source, record, detail) -> None:
        tool = "wait_agent" if record["recipient"]["name"] in self.tree else "receive_messages"
        self.add(at, source, CORE, record["recipient"]["name"], "-->>",
                 f"{tool}: {record['kind']} {_short(record['record_id'])}")

    # -- the rollouts ----------------------------------------------------------------------------

    def from_rollouts(self, index: RolloutIndex, thread_agents: Mapping[str, str]) -> None:
        for (thread_id, _turn_id), turn in index.turns.items():
            agent = thread_agents.get(thread_id)
            if agent is None:
                continue
            if turn.started is not None and turn.trigger == "operator":
                self.add(parse_time(turn.started_at), f"rollout:{turn.started}", agent, agent, "note",
                         f"operator prompt starts turn {_short(turn.turn_id)}")
            if turn.ended is not None and turn.turn_id not in self.bound_turns:
                ending = (_quote(turn.final_message) if turn.status == "completed"
                          else turn.abort_reason or _error_text(turn.error))
                self.add(parse_time(turn.ended_at), f"rollout:{turn.ended}", agent, agent, "note",
                         f"turn {_short(turn.turn_id)} {turn.status}: {ending}")
        for call in index.tool_calls(name=None):
            agent = thread_agents.get(call.thread_id)
            if agent is None or call.namespace not in TOOL_NAMESPACES or call.name not in ("wait_agent", "interrupt_agent"):
                continue
            args = call.parsed_arguments()
            label = (f"interrupt_agent {args.get('target')}" if call.name == "interrupt_agent" and isinstance(args, dict)
                     else call.name)
            self.add(parse_time(call.called_at), f"rollout:{call.call}", agent, CORE, "->>", label)
            result = tool_result(call.output)
            if call.output_at is None or not isinstance(result, dict):
                continue
            target = (result.get("target") or {}).get("name") if isinstance(result.get("target"), dict) else None
            if call.name == "interrupt_agent" and result.get("state") == "interrupt_requested" and target:
                # Sent while the call ran; the rollout has no line of its own for it, so draw it
                # right after the call rather than at the output, which may come after the turn ended.
                self.add(parse_time(call.called_at), f"rollout:{call.output_at}", ADAPTER, target, "->>",
                         f"turn/interrupt (turn {_short(result.get('turn_id'))})")
            if call.name == "wait_agent" and "woke" not in result and "timed_out" in result:
                # The collaboration profile's wait: what arrived, named, or a timeout.
                answer = "timed out" if result["timed_out"] else f"woke: {result.get('message')}"
            elif call.name == "wait_agent":
                answer = f"woke: {result.get('wake_reason')}" if result.get("woke") else "timed out"
            else:
                answer = f"{result.get('state') or result.get('code') or 'answered'} (turn {_short(result.get('turn_id'))})"
            self.add(index.timestamp(call.output_at), f"rollout:{call.output_at}", CORE, agent, "-->>", answer)


def _error_text(error: str | None) -> str:
    # A failed model request's error is often the provider's JSON error body.
    try:
        body = json.loads(error or "")
    except ValueError:
        return error or ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message") or error)
    return error or ""


def tool_result(output: Any) -> Any:
    """The JSON result inside a recorded ``function_call_output`` (after ``Output:``), or ``None``.

    Codex renders a structured result as one string and a content-only result as
    a list of text parts; see ``docs/codex-protocol.md``.
    """
    if isinstance(output, list):
        output = "\n".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    if not isinstance(output, str):
        return None
    _, _, rest = output.partition("Output:")
    try:
        return json.loads(rest.strip() or output)
    except ValueError:
        return None
