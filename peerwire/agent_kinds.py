"""What each kind of agent can be asked to do through its provider adapter, as data.

One row per agent kind (the pinned release of each), one cell per delivery
feature. A cell says whether the adapter uses a native path, which one, and
what happens instead where there is none (the declared capability limit). Every
cell names the test or recorded fixture that proves it (``evidence``: a pytest
node id or a path under ``fixtures/``); a test checks that each one exists.

The features:

* ``inject``: information, a reply or a notice enters the agent's live
  conversation without starting a turn;
* ``steer``: a task joins the turn the agent is running;
* ``start``: a task starts a turn on an idle agent;
* ``interrupt``: ``interrupt_agent`` ends exactly the agent's active turn;
* ``exact_completion``: the adapter observes the end of the exact turn that
  carried a task (so it can answer for that task);
* ``native_reply``: that turn's final agent message is published as the task's
  reply without the agent calling ``reply``.

Beside the features, each kind says which traces of its work the acceptance
checks can read (:class:`Trace`): its own history on disk, the provider
metadata of its tool calls, its model requests. A check that reads a trace an
agent's kind lacks is skipped for that agent, naming it; never passed.

Kinds are named as the runner's ``--agents`` names them: ``codex``,
``opencode``, or ``acp:NAME`` for any other ACP agent the user runs
(:func:`agent_kind`), which gets the ACP adapter's row (:data:`ANY_ACP`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Iterable, Mapping


class Feature(StrEnum):
    INJECT = "inject"
    STEER = "steer"
    START = "start"
    INTERRUPT = "interrupt"
    EXACT_COMPLETION = "exact_completion"
    NATIVE_REPLY = "native_reply"


class Trace(StrEnum):
    """What the harness can read of an agent's work besides the core's records and the adapter's transcript."""

    ROLLOUT = "rollout"
    """Its provider's own history, one record a line, on disk (Codex rollouts)."""
    CALL_META = "call_meta"
    """Its MCP ``tools/call`` carries ``_meta`` (call id, thread, turn): a receipt binds the exact call."""
    MODEL_LOG = "model_log"
    """Its model requests are in the run's model request log (the scripted model's, or the recording proxy's)."""


CAPABILITIES = (*(f.value for f in Feature), *(t.value for t in Trace))
"""Every capability name a check or a scenario step may require."""


@dataclass(frozen=True)
class Cell:
    supported: bool
    how: str
    """The native path used, or (unsupported) what the adapter does instead: the declared limit."""
    evidence: tuple[str, ...]
    """Tests (``tests/...py::name``) and fixtures (``fixtures/...``) that prove the cell."""


@dataclass(frozen=True)
class AgentKind:
    name: str
    provider: str
    """The peerwire provider adapter that drives it (``codex``, ``acp``)."""
    release: str
    """The pinned release the cells were established against."""
    cells: Mapping[Feature, Cell]
    traces: Mapping[Trace, Cell]
    """Which of its traces the checks can read (:class:`Trace`), each backed like a feature's cell."""

    def can(self, capability: str) -> bool:
        """Whether the kind has ``capability``: a :class:`Feature` or a :class:`Trace` name."""
        return self.cell(capability).supported

    def cell(self, capability: str) -> Cell:
        """The cell of ``capability`` (a :class:`Feature` or :class:`Trace` name); ``ValueError`` for another."""
        for cells in (self.cells, self.traces):
            for key, cell in cells.items():
                if key.value == capability:
                    return cell
        raise ValueError(f"unknown capability {capability!r} (known: {', '.join(CAPABILITIES)})")

    def to_json(self) -> dict[str, object]:
        """The kind's row of the capability table, as a report carries it."""
        def cells(row: Mapping[Feature, Cell] | Mapping[Trace, Cell]) -> dict[str, object]:
            return {key.value: {"supported": cell.supported, "how": cell.how, "evidence": list(cell.evidence)}
                    for key, cell in row.items()}
        return {"kind": self.name, "provider": self.provider, "release": self.release,
                "features": cells(self.cells), "traces": cells(self.traces)}

    def limits(self) -> dict[str, str]:
        """Each unsupported feature and what happens instead."""
        return {feature.value: cell.how for feature, cell in self.cells.items() if not cell.supported}

    def row(self) -> dict[str, bool]:
        return {feature.value: self.cells[feature].supported for feature in Feature}


_CODEX_REPLAY = "tests/codex/test_adapter_replay.py"
_CODEX_LIVE = "tests/codex/test_app_server.py"
_ACP_REPLAY = "tests/acp/test_adapter_replay.py"
_ACP_LIVE = "tests/acp/test_adapter_live.py"
_ACP_HISTORY = "tests/acp/test_history.py"
_ACP_KINDS = "tests/acp/test_any_acp_agent.py"

AGENT_KINDS: Mapping[str, AgentKind] = {
    "codex": AgentKind("codex", "codex", "@openai/codex 0.171.0", {
        Feature.INJECT: Cell(True, "thread/inject_items (a user message item, no turn started)",
                             ("fixtures/appserver/inject.jsonl",)),
        Feature.STEER: Cell(True, "turn/steer fenced by expectedTurnId", ("fixtures/appserver/steer.jsonl",
                                                                         "fixtures/appserver/stale_steer.jsonl")),
        Feature.START: Cell(True, "turn/start on the owner's thread", ("fixtures/appserver/idle_start.jsonl",)),
        Feature.INTERRUPT: Cell(True, "turn/interrupt of the active turn id", ("fixtures/appserver/interrupt.jsonl",)),
        Feature.EXACT_COMPLETION: Cell(True, "turn/completed of the bound turn id",
                                       ("fixtures/appserver/idle_start.jsonl", "fixtures/appserver/failed_turn.jsonl")),
        Feature.NATIVE_REPLY: Cell(True, "the turn's final_answer item (or last unknown-phase item) becomes reply done",
                                   ("fixtures/appserver/idle_start.jsonl", "fixtures/appserver/explicit_reply.jsonl")),
    }, {
        Trace.ROLLOUT: Cell(True, "$CODEX_HOME/sessions/**/rollout-*.jsonl",
                            ("fixtures/collab/fork-parent.rollout.jsonl",
                             "tests/evidence/test_rollouts.py::test_tool_calls_carry_call_and_output_lines")),
        Trace.CALL_META: Cell(True, "tools/call _meta: callId and x-codex-turn-metadata (thread, turn, model)",
                              (f"{_CODEX_LIVE}::test_an_mcp_tool_call_round_trips_with_codex_call_metadata",
                               "tests/core/test_mcp_server.py::test_codex_call_metadata_becomes_the_tool_receipt")),
        Trace.MODEL_LOG: Cell(True, "the scripted model's log, or the recording proxy's in front of a real provider",
                              ("tests/codex/test_adapter_live.py::test_the_task_envelope_reaches_the_model_exactly",)),
    }),
    "opencode": AgentKind("opencode", "acp", "opencode-ai 1.18.33 (opencode acp)", {
        Feature.INJECT: Cell(False, "ACP has no way into a conversation without a turn: information, replies and "
                             "notices wait for the agent's next receive_messages, or go in its next prompt",
                             ("fixtures/acp/next_turn.jsonl", f"{_ACP_LIVE}::test_information_waits_for_receive")),
        Feature.STEER: Cell(False, "ACP cannot add to a running prompt: a task for a busy agent waits until its "
                            "turn ends, then goes in the next prompt", ("fixtures/acp/busy.jsonl",)),
        Feature.START: Cell(True, "session/prompt with the task and the literal text as two content blocks",
                            ("fixtures/acp/idle_prompt.jsonl", f"{_ACP_LIVE}::test_a_task_is_answered_automatically")),
        Feature.INTERRUPT: Cell(True, "session/cancel; the prompt is answered cancelled",
                                ("fixtures/acp/cancel.jsonl", f"{_ACP_LIVE}::test_an_interrupt_cancels_the_turn")),
        Feature.EXACT_COMPLETION: Cell(True, "the answer to the task's own session/prompt (its stopReason)",
                                       ("fixtures/acp/idle_prompt.jsonl", "fixtures/acp/failed_prompt.jsonl")),
        Feature.NATIVE_REPLY: Cell(True, "stopReason end_turn: the last agent message with no tool call after it "
                                   "becomes reply done", ("fixtures/acp/idle_prompt.jsonl",
                                                          "fixtures/acp/explicit_reply.jsonl",
                                                          f"{_ACP_REPLAY}::test_the_final_message_is_the_reply")),
    }, {
        Trace.ROLLOUT: Cell(False, "its history is SQLite (data/opencode/opencode.db); the ACP transcript "
                            "(tool calls, messages, turns) is read instead",
                            (f"{_ACP_HISTORY}::test_a_task_turn_reads_as_a_history",)),
        Trace.CALL_META: Cell(False, "its tools/call carries no _meta: a receipt binds no provider call, thread or "
                              "turn", (f"{_ACP_LIVE}::test_an_explicit_reply_suppresses_the_automatic_one",)),
        Trace.MODEL_LOG: Cell(True, "the scripted model's Chat Completions face logs every request",
                              (f"{_ACP_LIVE}::test_a_task_is_answered_automatically",)),
    }),
}
"""The capability table: agent kind -> its cells (README and reports show it from here)."""


ANY_ACP = AgentKind("acp", "acp", "any ACP agent the user runs (--acp-agent NAME=COMMAND)",
                    AGENT_KINDS["opencode"].cells, {
    Trace.ROLLOUT: Cell(False, "no history of its own is read; the ACP transcript is",
                        (f"{_ACP_HISTORY}::test_a_task_turn_reads_as_a_history",)),
    Trace.CALL_META: Cell(False, "not assumed: a receipt binds no provider call, thread or turn",
                          (f"{_ACP_KINDS}::test_checks_needing_a_missing_trace_are_skipped_by_name",)),
    Trace.MODEL_LOG: Cell(False, "it talks to its own, real provider: no request of it is logged",
                          (f"{_ACP_KINDS}::test_checks_needing_a_missing_trace_are_skipped_by_name",)),
})
"""The row of any other ACP agent: the ACP adapter's features (the protocol's limits are the adapter's), and
none of the traces an unknown agent may not leave."""

ACP_PREFIX = "acp:"


def agent_kind(name: str) -> AgentKind:
    """The kind ``--agents`` names: ``codex``, ``opencode`` or ``acp:NAME`` (any ACP agent, :data:`ANY_ACP`'s
    row under its own name); ``KeyError`` for any other."""
    if name in AGENT_KINDS:
        return AGENT_KINDS[name]
    if name.startswith(ACP_PREFIX) and len(name) > len(ACP_PREFIX):
        return AgentKind(name, ANY_ACP.provider, ANY_ACP.release, ANY_ACP.cells, ANY_ACP.traces)
    raise KeyError(f"unknown agent kind {name!r} (known: {', '.join(AGENT_KINDS)}, or acp:NAME)")


def table(kinds: Iterable[str] = ()) -> list[dict[str, object]]:
    """The capability table as JSON rows: every kind of :data:`AGENT_KINDS` and the generic ACP row, then any
    ``acp:NAME`` among ``kinds`` (the kinds a run used) under its own name."""
    names = [*AGENT_KINDS, ANY_ACP.name]
    names += [kind for kind in dict.fromkeys(kinds) if kind not in names]
    return [(ANY_ACP if name == ANY_ACP.name else agent_kind(name)).to_json() for name in names]


def kind_of_provider(provider: str) -> list[AgentKind]:
    """The agent kinds a provider adapter drives."""
    return [kind for kind in AGENT_KINDS.values() if kind.provider == provider]
