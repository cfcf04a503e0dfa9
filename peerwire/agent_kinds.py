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
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Mapping


class Feature(StrEnum):
    INJECT = "inject"
    STEER = "steer"
    START = "start"
    INTERRUPT = "interrupt"
    EXACT_COMPLETION = "exact_completion"
    NATIVE_REPLY = "native_reply"


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

    def limits(self) -> dict[str, str]:
        """Each unsupported feature and what happens instead."""
        return {feature.value: cell.how for feature, cell in self.cells.items() if not cell.supported}

    def row(self) -> dict[str, bool]:
        return {feature.value: self.cells[feature].supported for feature in Feature}


_CODEX_REPLAY = "tests/codex/test_adapter_replay.py"
_ACP_REPLAY = "tests/acp/test_adapter_replay.py"
_ACP_LIVE = "tests/acp/test_adapter_live.py"

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
    }),
}
"""The capability table: agent kind -> its cells (README and reports show it from here)."""


def kind_of_provider(provider: str) -> list[AgentKind]:
    """The agent kinds a provider adapter drives."""
    return [kind for kind in AGENT_KINDS.values() if kind.provider == provider]
