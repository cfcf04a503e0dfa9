"""What a finished scenario run left behind, read back for judging.

The sources, all inside one scenario's artifacts folder:

* ``core-dump.json`` — every row of the core's store (records, evidence,
  requests, claims, bindings, agents);
* ``appserver/<agent>.g<n>.appserver.jsonl`` — each owner generation's
  JSON-RPC transcript (``dir`` sent/received, ``message``);
* ``rollouts/<agent>/*.jsonl`` — the agent's Codex rollouts;
* ``model-requests.jsonl`` — every request Codex sent the scripted model and
  what it answered (absent with a real provider);

plus what the runner itself saw: the turn ids of its prompts, the receipts of
its tool steps and the owners it attached. Every line handed to a check
carries its reference (``rollouts/B/<file>:<line>``,
``appserver/B.g1.appserver.jsonl:<line>``, 1-based) so a verdict can cite it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.model_rules import json_objects

CORE_DUMP = "core-dump.json"
MODEL_REQUESTS = "model-requests.jsonl"
APPSERVER_DIR = "appserver"
ROLLOUTS_DIR = "rollouts"


class EvidenceMissing(LookupError):
    """A check asked for something the run did not record (a label, a record, a file)."""


@dataclass(frozen=True)
class TranscriptLine:
    ref: str
    generation: int
    dir: str  # sent | received
    message: dict[str, Any]

    @property
    def method(self) -> str | None:
        return self.message.get("method")

    @property
    def params(self) -> dict[str, Any]:
        return self.message.get("params") or {}


@dataclass(frozen=True)
class RolloutLine:
    ref: str
    type: str
    payload: dict[str, Any]
    turn_id: str | None
    """The turn this line belongs to (between its task_started and its end), else None."""

    @property
    def item_type(self) -> str | None:
        return self.payload.get("type")

    def text(self) -> str:
        """A message's text parts joined, or a tool output's text."""
        content = self.payload.get("content") if self.item_type == "message" else self.payload.get("output")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
        return ""


@dataclass(frozen=True)
class ModelExchange:
    seq: int
    agent: str | None
    body: dict[str, Any]
    rule: str | None = None
    outcome: str | None = None
    items: tuple[dict[str, Any], ...] = ()

    def input_items(self) -> list[dict[str, Any]]:
        return [item for item in self.body.get("input") or [] if isinstance(item, dict)]

    @property
    def turn_id(self) -> str | None:
        """The Codex turn this request belongs to (Codex sends it in ``client_metadata``)."""
        metadata = self.body.get("client_metadata")
        return metadata.get("turn_id") if isinstance(metadata, dict) else None


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


class Observations:
    """Read access to one scenario run's artifacts (see the module docs)."""

    def __init__(self, artifacts: Path, view: RunnerView):
        self.artifacts = Path(artifacts)
        self.view = view
        dump = json.loads((self.artifacts / CORE_DUMP).read_text(encoding="utf-8"))
        self.interactions: list[dict[str, Any]] = sorted(dump.get("interactions", []), key=lambda r: r["seq"])
        for row in self.interactions:
            row["tool_receipt"] = json.loads(row["tool_receipt"]) if row.get("tool_receipt") else None
        self.evidence_rows: list[dict[str, Any]] = dump.get("evidence", [])
        for row in self.evidence_rows:
            row["detail"] = json.loads(row["detail"]) if isinstance(row.get("detail"), str) else row.get("detail")
        self.bindings: list[dict[str, Any]] = dump.get("bindings", [])
        self.requests: list[dict[str, Any]] = dump.get("requests", [])
        self._transcripts: dict[str, list[TranscriptLine]] = {}
        self._rollouts: dict[str, list[RolloutLine]] = {}
        self.model_exchanges: list[ModelExchange] = _read_model_log(self.artifacts / MODEL_REQUESTS)

    # -- the store ------------------------------------------------------------

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

    def record(self, interaction_id: str) -> dict[str, Any]:
        for row in self.interactions:
            if row["interaction_id"] == interaction_id:
                return row
        raise EvidenceMissing(f"no record {interaction_id} in the core dump")

    def evidence(self, interaction_id: str, stage: str | None = None) -> list[dict[str, Any]]:
        return [row for row in self.evidence_rows
                if row["interaction_id"] == interaction_id and stage in (None, row["stage"])]

    def bindings_of(self, request_id: str) -> list[dict[str, Any]]:
        return [row for row in self.bindings if row["request_id"] == request_id]

    def select(self, selector: str | Mapping[str, Any]) -> dict[str, Any]:
        """The one record a scenario's selector names (see :func:`select_record`)."""
        return select_record(self.interactions, selector, self.view)

    def turn(self, label: str) -> dict[str, Any]:
        try:
            return self.view.turns[label]
        except KeyError:
            raise EvidenceMissing(f"no turn labelled {label!r} was observed") from None

    # -- app-server transcripts -------------------------------------------------

    def transcript(self, agent: str) -> list[TranscriptLine]:
        """Every generation's transcript of ``agent``, in generation order."""
        if agent not in self._transcripts:
            lines: list[TranscriptLine] = []
            for path in sorted((self.artifacts / APPSERVER_DIR).glob(f"{agent}.g*.appserver.jsonl"),
                               key=lambda p: int(p.name.split(".g")[1].split(".")[0])):
                generation = int(path.name.split(".g")[1].split(".")[0])
                for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                    entry = json.loads(raw)
                    lines.append(TranscriptLine(f"{APPSERVER_DIR}/{path.name}:{number}", generation,
                                                entry["dir"], entry["message"]))
            self._transcripts[agent] = lines
        return self._transcripts[agent]

    def response_to(self, agent: str, request: TranscriptLine) -> TranscriptLine | None:
        """The answer to a request sent on the same generation's connection."""
        for line in self.transcript(agent):
            if (line.generation == request.generation and line.dir == "received"
                    and line.message.get("id") == request.message.get("id") and "method" not in line.message):
                return line
        return None

    # -- rollouts ----------------------------------------------------------------

    def rollout(self, agent: str) -> list[RolloutLine]:
        """The agent's rollout lines, file by file in name (creation) order, each tagged with its turn."""
        if agent not in self._rollouts:
            lines: list[RolloutLine] = []
            for path in sorted((self.artifacts / ROLLOUTS_DIR / agent).glob("*.jsonl")):
                turn: str | None = None
                for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                    entry = json.loads(raw)
                    payload = entry.get("payload") or {}
                    kind = entry.get("type", "")
                    if kind == "event_msg" and payload.get("type") == "task_started":
                        turn = payload.get("turn_id")
                    lines.append(RolloutLine(f"{ROLLOUTS_DIR}/{agent}/{path.name}:{number}", kind, payload, turn))
                    if kind == "event_msg" and payload.get("type") in ("task_complete", "turn_aborted"):
                        turn = None
            self._rollouts[agent] = lines
        return self._rollouts[agent]

    def tool_calls(self, agent: str, tool: str) -> Iterator[tuple[RolloutLine, RolloutLine | None]]:
        """The agent's calls of a peerwire tool with their outputs: (function_call, function_call_output)."""
        lines = self.rollout(agent)
        for line in lines:
            if (line.type == "response_item" and line.item_type == "function_call"
                    and line.payload.get("name") == tool and line.payload.get("namespace") == "mcp__peerwire"):
                call_id = line.payload.get("call_id")
                output = next((o for o in lines if o.type == "response_item"
                               and o.item_type == "function_call_output" and o.payload.get("call_id") == call_id),
                              None)
                yield line, output

    def final_messages(self, agent: str) -> list[RolloutLine]:
        """The agent's final answers (assistant messages of phase final_answer), in order."""
        return [line for line in self.rollout(agent) if line.type == "response_item"
                and line.item_type == "message" and line.payload.get("role") == "assistant"
                and line.payload.get("phase") == "final_answer"]

    # -- the model request log ---------------------------------------------------------

    def exchanges(self, agent: str) -> list[ModelExchange]:
        return [exchange for exchange in self.model_exchanges if exchange.agent == agent]


def select_record(rows: list[dict[str, Any]], selector: str | Mapping[str, Any], view: RunnerView) -> dict[str, Any]:
    """The one row of ``rows`` (interactions in mailbox order) a scenario's selector names.

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
        found = [row for row in rows if row["interaction_id"] == receipt["interaction_id"]]
        if not found:
            raise EvidenceMissing(f"record {receipt['interaction_id']} ({selector}) is not in the store")
        return found[0]
    everything = rows
    if "kind" in selector:
        rows = [r for r in rows if r["kind"] == selector["kind"]]
    if "sender" in selector:
        sender = None if selector["sender"] == "peerwire" else agent_id(selector["sender"])
        rows = [r for r in rows if r["sender_id"] == sender]
    if "recipient" in selector:
        rows = [r for r in rows if r["recipient_id"] == agent_id(selector["recipient"])]
    if "request_of" in selector:
        request_id = select_record(everything, selector["request_of"], view).get("request_id")
        rows = [r for r in rows if r["request_id"] == request_id and r["kind"] != "task"]
    nth = selector.get("nth")
    if nth is None and len(rows) != 1:
        raise EvidenceMissing(f"{len(rows)} records match {dict(selector)}, not exactly one")
    if nth is not None and len(rows) < nth:
        raise EvidenceMissing(f"only {len(rows)} records match {dict(selector)}, no number {nth}")
    return rows[(nth or 1) - 1]


def output_json(text: str) -> dict[str, Any] | None:
    """The first JSON object in a tool output's text (Codex prefixes ``Wall time`` lines)."""
    return next(json_objects(text), None)


def item_text(item: Mapping[str, Any]) -> str:
    """The text of a Responses input item: message parts joined, or a tool output."""
    content = item.get("content") if item.get("type") == "message" else item.get("output")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return ""


def _read_model_log(path: Path) -> list[ModelExchange]:
    if not path.is_file():
        return []
    requests: dict[int, ModelExchange] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(raw)
        if entry.get("event") == "request":
            requests[entry["seq"]] = ModelExchange(entry["seq"], entry.get("agent"),
                                                   entry.get("body") if isinstance(entry.get("body"), dict) else {})
        elif entry.get("event") == "response" and entry.get("seq") in requests:
            request = requests[entry["seq"]]
            requests[entry["seq"]] = ModelExchange(request.seq, request.agent, request.body, entry.get("rule"),
                                                   entry.get("outcome"), tuple(entry.get("items") or ()))
    return [requests[seq] for seq in sorted(requests)]
