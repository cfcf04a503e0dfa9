"""A finished scenario run's evidence, as the checks judge it.

The evidence itself is read by :class:`~harness.evidence.scenario.ScenarioEvidence`,
the same reader the report uses: the core's export, the app-server and ACP
transcripts, the rollouts, the model request log and the TUI screens. :class:`Observations`
adds what the runner itself saw (:class:`RunnerView`: the turn ids of its
prompts, the receipts of its tool steps and the owners it attached) and the
questions the checks ask of both. An agent's rollout is the lines of its own
threads: a collaboration child is a thread of its root's app-server, so its
rollout file lies in the root's folder but belongs to the child.

Agents are of a kind (``view.kinds``, :mod:`harness.capabilities`). An ACP
agent (OpenCode) leaves no rollout: its history is its ACP transcript, read as
rollout lines (:mod:`harness.evidence.acp_history`), so :meth:`Observations.rollout`,
:meth:`~Observations.tool_calls` and :meth:`~Observations.final_messages` answer
for either kind. A check that needs what an agent's kind lacks (a capability or
a trace) asks :meth:`Observations.require`, which raises :class:`Skipped`
naming it: the verdict is a skip, never a pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.capabilities import AgentKind, agent_kind

from harness.names import TOOL_NAMESPACES
from harness.evidence.acp_history import AcpHistory, AcpLine, AcpTurn
from harness.evidence.core import ExportError
from harness.evidence.layout import ROLLOUTS_DIR, TUI_DIR, pane_name, screen_name
from harness.evidence.model_log import ModelRequest
from harness.evidence.responses import item_text, json_objects
from harness.evidence.rollouts import RolloutIndex, RolloutLine
from harness.evidence.scenario import ScenarioEvidence, ScreenLine, TranscriptLine
from harness.model.probe import ProbeObservation

__all__ = ["EvidenceMissing", "Observations", "RunnerView", "ScreenLine", "Skipped", "TranscriptLine", "output_json",
           "select_record"]

_CLOCK_SLACK_S = 0.05
"""Two processes stamp the model log and an ACP transcript: allow this much between their clocks' readings."""


class EvidenceMissing(LookupError):
    """A check asked for something the run did not record (a label, a record, a file)."""


class Skipped(Exception):
    """A check cannot be judged for an agent whose kind lacks ``capability`` (a feature or a trace): its
    verdict is a skip naming them, never a pass."""

    def __init__(self, agent: str, kind: str, capability: str, why: str):
        self.agent, self.kind, self.capability, self.why = agent, kind, capability, why
        super().__init__(f"{agent} is {kind}, which lacks {capability}: {why}")


@dataclass
class RunnerView:
    """What the runner observed while driving the scenario."""

    agents: dict[str, str] = field(default_factory=dict)
    """Agent name -> agent_id (Codex agents and peers)."""
    turns: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Turn label -> {agent, turn_id, status}."""
    receipts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Tool-step label -> the tool's result (or {"error": {...}})."""
    attachments: list[dict[str, Any]] = field(default_factory=list)
    """Every owner attached, in order: {agent, generation, thread_id, pid, resume}."""
    mode: str = "attached"
    scripted: bool = True
    kinds: dict[str, str] = field(default_factory=dict)
    """Agent name -> its kind (``codex``, ``opencode``, ``acp:NAME``); an agent not named is Codex."""


class Observations:
    """Read access to one scenario run's artifacts (see the module docs).

    Agents the core registered during the run (the children a collaboration
    root spawned) join ``view.agents`` under their names, so selectors and
    checks can name them like the agents the runner started. ``probe`` is the
    collaboration probe computed for the run (scenarios with a ``[probe]``).
    """

    def __init__(self, evidence: ScenarioEvidence, view: RunnerView, *, probe: ProbeObservation | None = None):
        if evidence.core is None:
            raise ExportError(evidence.export_error or "the core's evidence export is unusable")
        self.source = evidence
        """The evidence files, read (the same reader the report uses)."""
        self.artifacts = evidence.root
        self.view = view
        self.probe = probe
        self.core = evidence.core
        """The core's evidence export: records, evidence rows, requests, bindings, agents."""
        self.records = self.core.records
        self.bindings = self.core.bindings
        self.agents = self.core.agents
        for row in self.agents:
            view.agents.setdefault(row["name"], row["agent_id"])
        self.paths = self.core.paths
        self.rollouts: RolloutIndex = evidence.rollouts
        """Every rollout of the run, indexed (files in path order: agent folder, then creation)."""
        self.model_exchanges: list[ModelRequest] = evidence.model_log.requests

    @classmethod
    def load(cls, artifacts: Path, view: RunnerView, *, probe: ProbeObservation | None = None) -> "Observations":
        """The observations of the artifacts folder ``artifacts``; ExportError when the core's export is missing,
        unreadable or off its schema."""
        # Every run keeps a model request log: the scripted model's, or the recording proxy's (a real provider).
        return cls(ScenarioEvidence.load(artifacts, strict=True), view, probe=probe)

    # -- the core's export ------------------------------------------------------

    def agent_id(self, name: str) -> str:
        try:
            return self.view.agents[name]
        except KeyError:
            raise EvidenceMissing(f"no agent {name!r} in this run") from None

    def agent_name(self, agent_id: str | None) -> str:
        for name, known in self.view.agents.items():
            if known == agent_id:
                return name
        return "peerwire" if agent_id is None else agent_id

    # -- kinds and capabilities ------------------------------------------------

    def kind(self, agent: str) -> AgentKind:
        """The kind of ``agent`` (Codex unless the runner started it as another)."""
        return agent_kind(self.view.kinds.get(agent, "codex"))

    def is_acp(self, agent: str) -> bool:
        """Whether ``agent`` is driven through the ACP adapter (its history is its ACP transcript)."""
        return self.kind(agent).provider == "acp"

    def require(self, agent: str, capability: str) -> None:
        """Raise :class:`Skipped` unless ``agent``'s kind has ``capability`` (a feature or a trace)."""
        kind = self.kind(agent)
        if not kind.can(capability):
            raise Skipped(agent, kind.name, capability, kind.cell(capability).how)

    def record(self, record_id: str) -> dict[str, Any]:
        found = self.core.record(record_id)
        if found is None:
            raise EvidenceMissing(f"no record {record_id} in the core's export")
        return found

    def evidence(self, record_id: str, stage: str | None = None) -> list[dict[str, Any]]:
        return self.core.evidence(record_id, stage)

    def bindings_of(self, request_id: str) -> list[dict[str, Any]]:
        return self.core.bindings_of(request_id)

    def request(self, request_id: str) -> dict[str, Any]:
        found = self.core.request(request_id)
        if found is None:
            raise EvidenceMissing(f"no request {request_id} in the core's export")
        return found

    def select(self, selector: str | Mapping[str, Any]) -> dict[str, Any]:
        """The one record a scenario's selector names (see :func:`select_record`)."""
        return select_record(self.records, selector, self.view)

    def turn(self, label: str) -> dict[str, Any]:
        try:
            return self.view.turns[label]
        except KeyError:
            raise EvidenceMissing(f"no turn labelled {label!r} was observed") from None

    def agent_row(self, name: str) -> dict[str, Any]:
        """The core's row of agent ``name`` (its path, parent, thread, status)."""
        agent_id = self.agent_id(name)
        for row in self.agents:
            if row["agent_id"] == agent_id:
                return row
        raise EvidenceMissing(f"no agent row for {name} in the core's export")

    def threads(self, agent: str) -> list[str]:
        """The agent's Codex threads: those of the owners the runner attached, and the one the core records."""
        threads = [a["thread_id"] for a in self.view.attachments if a["agent"] == agent]
        agent_id = self.view.agents.get(agent)
        threads += [row["provider_session_id"] for row in self.agents
                    if row["agent_id"] == agent_id and row.get("provider_session_id")]
        return list(dict.fromkeys(threads))

    # -- app-server transcripts -------------------------------------------------

    def transcript(self, agent: str) -> list[TranscriptLine]:
        """Every generation's transcript of ``agent``, in generation order. A child of a collaboration tree
        has none of its own: its thread's traffic is in its root's (see :meth:`host`)."""
        return self.source.transcript(agent)

    def host(self, agent: str) -> str:
        """The agent whose app-server transcript carries ``agent``'s threads: itself, or for a child
        of a collaboration tree (a thread of its root's app-server) the nearest ancestor with one."""
        name, seen = agent, set()
        while not self.transcript(name) and name not in seen:
            seen.add(name)
            parent = next((row.get("parent_agent_id") for row in self.agents
                           if row["agent_id"] == self.view.agents.get(name)), None)
            if not parent:
                return agent
            name = self.agent_name(parent)
        return name

    def response_to(self, agent: str, request: TranscriptLine) -> TranscriptLine | None:
        """The answer to a request sent on the same generation's connection."""
        for line in self.transcript(agent):
            if (line.generation == request.generation and line.dir == "received"
                    and line.message.get("id") == request.message.get("id") and "method" not in line.message):
                return line
        return None

    # -- attached TUI screens ------------------------------------------------------

    def screen(self, agent: str) -> list[ScreenLine]:
        """The lines of ``agent``'s TUI screen (mode attached_tui); EvidenceMissing when the run kept none."""
        lines = self.source.screen(agent)
        if lines is None:
            raise EvidenceMissing(f"no TUI screen of {agent} ({TUI_DIR}/{screen_name(agent)})")
        return lines

    def pane(self, agent: str) -> ScreenLine:
        """The state of ``agent``'s TUI pane when its screen was kept, as the line citing it (its ``text`` the
        JSON: ``alive``, ``exit_status``); EvidenceMissing when the run kept none."""
        found = self.source.pane(agent)
        if found is None:
            raise EvidenceMissing(f"no TUI pane state of {agent} ({TUI_DIR}/{pane_name(agent)})")
        ref, state = found
        return ScreenLine(f"{ref}:1", json.dumps(state))

    # -- rollouts ----------------------------------------------------------------

    def rollout(self, agent: str) -> list[RolloutLine]:
        """The agent's rollout lines, file by file in name (creation) order: those of its threads
        (see :meth:`threads`), or, when no thread of it is known, those of its folder. An ACP agent's are its
        history's (:meth:`history`)."""
        if self.is_acp(agent):
            return list(self.history(agent).lines)
        threads = set(self.threads(agent))
        if threads:
            return [line for line in self.rollouts.lines() if line.thread_id in threads]
        prefix = f"{ROLLOUTS_DIR}/{agent}/"
        return [line for line in self.rollouts.lines() if line.at.file.startswith(prefix)]

    def tool_calls(self, agent: str, tool: str) -> Iterator[tuple[RolloutLine, RolloutLine | None]]:
        """The agent's calls of a peerwire tool with their outputs: (function_call, function_call_output)."""
        if self.is_acp(agent):
            yield from self.history(agent).tool_calls(tool)
            return
        index = self.rollouts
        mine = {line.at for line in self.rollout(agent)}
        for call in index.tool_calls(name=tool):
            line = index.line(call.call)
            if line is not None and call.call in mine and call.namespace in TOOL_NAMESPACES:
                yield line, index.line(call.output_at)

    def final_messages(self, agent: str) -> list[RolloutLine]:
        """The agent's final answers (assistant messages of phase final_answer), in order."""
        return [line for line in self.rollout(agent) if line.record_type == "response_item"
                and line.payload_type == "message" and line.payload.get("role") == "assistant"
                and line.payload.get("phase") == "final_answer"]

    # -- ACP histories -------------------------------------------------------------------

    def history(self, agent: str) -> AcpHistory:
        """An ACP agent's history: its ACP transcript read as turns, messages and tool calls."""
        return self.source.acp_history(agent)

    def acp_transcript(self, agent: str) -> list[TranscriptLine]:
        """Every generation's ACP transcript of ``agent``, in generation order."""
        return self.source.acp_transcript(agent)

    def turn_outcomes(self, agent: str) -> list[tuple[str, str, TranscriptLine]]:
        """(turn id, how it ended: completed / interrupted / failed, the line that says so) of each of the
        agent's ended turns: ``turn/completed`` of a Codex owner, the answer to an ACP prompt."""
        if self.is_acp(agent):
            return [(turn.turn_id, turn.status, turn.answer) for turn in self.history(agent).turns
                    if turn.answer is not None]
        return [((line.params.get("turn") or {}).get("id"), (line.params.get("turn") or {}).get("status"), line)
                for line in self.transcript(agent) if line.method == "turn/completed"]

    def interrupts(self, agent: str) -> list[tuple[str | None, TranscriptLine]]:
        """(the turn it ended, the request) of each interrupt the adapter sent the agent: ``turn/interrupt``
        names its turn; an ACP ``session/cancel`` ends the prompt running when it was sent."""
        if self.is_acp(agent):
            history = self.history(agent)
            return [(getattr(history.turn_at(line), "turn_id", None), line) for line in history.cancels]
        return [(line.params.get("turnId"), line) for line in self.transcript(agent)
                if line.dir == "sent" and line.method == "turn/interrupt"]

    # -- the model request log ---------------------------------------------------------

    def exchanges(self, agent: str) -> list[ModelRequest]:
        """The requests on the agent's model route (a collaboration tree shares its root's route)."""
        return [exchange for exchange in self.model_exchanges if exchange.agent == agent]

    def turn_exchanges(self, agent: str, turn_id: str) -> list[ModelRequest]:
        """The agent's model requests of one turn: those Codex stamped with it, or for an ACP agent those of
        its session that arrived while that prompt ran (ACP runs one prompt at a time per session)."""
        if not self.is_acp(agent):
            return [exchange for exchange in self.exchanges(agent) if exchange.turn_id == turn_id]
        turn = self.history(agent).turn(turn_id)
        if turn is None:
            return []
        return [exchange for exchange in self.exchanges(agent) if _within(exchange, turn)]

    def producer(self, agent: str, final: RolloutLine) -> ModelRequest | None:
        """The model request whose answer was the final message ``final``: the one that emitted its item (Codex),
        or the last request of its ACP turn, answered before the message arrived, that emitted its text."""
        if not isinstance(final, AcpLine):
            return next((exchange for exchange in self.exchanges(agent)
                         if any(item.get("id") == final.payload.get("id") for item in exchange.items)), None)
        text = final.text()
        found = [exchange for exchange in self.turn_exchanges(agent, final.running_turn_id or "")
                 if any(item.get("type") == "message" and item_text(item) == text for item in exchange.items)
                 and (final.wall is None or exchange.answered_at is None
                      or exchange.answered_at <= final.wall + _CLOCK_SLACK_S)]
        return found[-1] if found else None

    def thread_exchanges(self, thread_id: str) -> list[ModelRequest]:
        """The requests Codex sent for one thread."""
        return [exchange for exchange in self.model_exchanges if exchange.thread_id == thread_id]


def _within(exchange: ModelRequest, turn: AcpTurn) -> bool:
    if exchange.session_id != turn.session_id or exchange.received_at is None or turn.started_at is None:
        return False
    if exchange.received_at < turn.started_at - _CLOCK_SLACK_S:
        return False
    return turn.ended_at is None or exchange.received_at <= turn.ended_at + _CLOCK_SLACK_S


def select_record(rows: list[dict[str, Any]], selector: str | Mapping[str, Any], view: RunnerView) -> dict[str, Any]:
    """The one record of ``rows`` (an export's records, in mailbox order) a scenario's selector names.

    A string is the label a tool step gave its receipt; a table filters by
    kind, sender (an agent name or ``peerwire``), recipient and ``request_of``
    (the reply or notice of that task), and ``nth`` picks among several.
    Raises :class:`EvidenceMissing` when it names none, or several without ``nth``.
    """
    def agent_id(name: str) -> str:
        if name not in view.agents:
            raise EvidenceMissing(f"no agent {name!r} in this run")
        return view.agents[name]

    if isinstance(selector, str):
        receipt = view.receipts.get(selector)
        if receipt is None or "interaction_id" not in receipt:
            raise EvidenceMissing(f"no admitted record labelled {selector!r}")
        found = [row for row in rows if row["record_id"] == receipt["interaction_id"]]
        if not found:
            raise EvidenceMissing(f"record {receipt['interaction_id']} ({selector}) is not in the store")
        return found[0]
    everything = rows
    if "kind" in selector:
        rows = [r for r in rows if r["kind"] == selector["kind"]]
    if "sender" in selector:
        sender = None if selector["sender"] == "peerwire" else agent_id(selector["sender"])
        rows = [r for r in rows if r["sender"]["agent_id"] == sender]
    if "recipient" in selector:
        rows = [r for r in rows if r["recipient"]["agent_id"] == agent_id(selector["recipient"])]
    if "request_of" in selector:
        request_id = select_record(everything, selector["request_of"], view).get("request_id")
        rows = [r for r in rows if r.get("request_id") == request_id and r["kind"] != "task"]
    nth = selector.get("nth")
    if nth is None and len(rows) != 1:
        raise EvidenceMissing(f"{len(rows)} records match {dict(selector)}, not exactly one")
    if nth is not None and len(rows) < nth:
        raise EvidenceMissing(f"only {len(rows)} records match {dict(selector)}, no number {nth}")
    return rows[(nth or 1) - 1]


def output_json(text: str) -> dict[str, Any] | None:
    """The first JSON object in a tool output's text (Codex prefixes ``Wall time`` lines)."""
    return next(json_objects(text), None)
