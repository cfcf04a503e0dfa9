"""The Codex owner as a state table: what its turns may do, refused otherwise with nothing changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from peerwire import diagrams
from peerwire.codex.owner import OwnerTurns
from peerwire.lifecycle import OWNER, IllegalTransition, OwnerEvent, OwnerState

DOC = Path(__file__).resolve().parents[2] / "docs" / "lifecycles.md"


def _in(state: str, turn: str | None = "t1") -> OwnerTurns:
    turns = OwnerTurns()
    turns.state, turns.turn = state, turn
    return turns


def test_a_turn_is_started_observed_and_ended_through_the_table():
    turns = OwnerTurns()
    assert (turns.state, turns.current) == (OwnerState.IDLE, None)
    turns.accepted("t1")
    assert (turns.state, turns.current, turns.waits_to_start("t1")) == (OwnerState.STARTING, "t1", True)
    turns.started("t1")
    assert (turns.state, turns.current, turns.waits_to_start("t1")) == (OwnerState.ACTIVE, "t1", False)
    assert turns.ended("t0") is False and turns.state == OwnerState.ACTIVE, "another turn's end changes nothing"
    assert turns.ended("t1") is True and (turns.state, turns.current) == (OwnerState.IDLE, None)
    turns.detach()
    assert turns.over and turns.current is None


@pytest.mark.parametrize("state", sorted(OWNER.states))
@pytest.mark.parametrize("event", sorted(OWNER.events))
def test_every_event_the_table_does_not_allow_raises_and_changes_nothing(state, event):
    turns = _in(state)
    act = {OwnerEvent.TURN_ACCEPTED: lambda: turns.accepted("t2"), OwnerEvent.TURN_STARTED: lambda: turns.started("t2"),
           OwnerEvent.TURN_ENDED: lambda: turns.ended("t1"), OwnerEvent.DETACH: turns.detach,
           OwnerEvent.EXIT: turns.exit}[event]
    if event == OwnerEvent.TURN_ENDED and turns.current != "t1":
        assert act() is False and (turns.state, turns.turn) == (state, "t1")  # not its turn: no event at all
        return
    if OWNER.allows(state, event):
        act()
        assert turns.state == OWNER.next(state, event)
    else:
        with pytest.raises(IllegalTransition):
            act()
        assert (turns.state, turns.turn) == (state, "t1")


def test_a_detached_or_exited_owner_has_no_way_back():
    for state in OWNER.terminal:
        assert not any(OWNER.allows(state, event) for event in OWNER.events)


def test_the_lifecycles_page_is_drawn_from_the_tables():
    assert DOC.read_text(encoding="utf-8") == diagrams.document(), "run: python -m peerwire.diagrams > docs/lifecycles.md"
    assert OWNER.mermaid() in DOC.read_text(encoding="utf-8")
