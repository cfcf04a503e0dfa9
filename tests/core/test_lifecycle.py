import pytest

from harness.contract.manifest import requirement
from peerwire.errors import Code, PeerwireError
from peerwire.lifecycle import (BINDING, INFORMATION, LIFECYCLES, NOTICE, OWNER, REPLY, TASK, BindingState,
                                DeliveryState, IllegalTransition, OwnerEvent, OwnerState, TaskState)
from peerwire.store import Store


def test_task_happy_paths():
    assert TASK.next("pending", "claim_by_receive") == "claimed"
    assert TASK.next("claimed", "reply") == "replied"
    state = TASK.next("pending", "claim_by_dispatch")
    assert TASK.next(state, "release") == "pending"
    assert TASK.next(TASK.next(state, "provider_accepted"), "observation_lost") == "uncertain"


ALL = [*LIFECYCLES.values(), BINDING, OWNER]


@pytest.mark.parametrize(("lifecycle", "states"), [
    (TASK, set(TaskState)), (BINDING, set(BindingState)), (OWNER, set(OwnerState)),
    (INFORMATION, set(DeliveryState) - {DeliveryState.PUBLISHED}),
    (REPLY, set(DeliveryState) - {DeliveryState.ADMITTED}), (NOTICE, set(DeliveryState) - {DeliveryState.ADMITTED}),
], ids=lambda x: getattr(x, "name", ""))
def test_each_table_names_its_states_from_its_enum(lifecycle, states):
    # States are enum members, not bare strings: a misspelt state in a table would be a new state.
    assert all(type(state) in {TaskState, BindingState, OwnerState, DeliveryState} for state in lifecycle.states)
    assert lifecycle.states == states


def test_states_compare_and_store_as_their_strings(tmp_path):
    store = Store(tmp_path / "peerwire.db")
    try:
        a, _ = store.registry.register_agent("a", "manual")
        b, _ = store.registry.register_agent("b", "manual")
        receipt = store.mailbox.admit_task(a, b, "do it")
        row = store.database.db.execute("SELECT state FROM interactions WHERE interaction_id = ?",
                                        (receipt["interaction_id"],)).fetchone()
        assert row[0] == TaskState.PENDING == "pending" and type(row[0]) is str
    finally:
        store.close()
    assert set(OWNER.events) == set(OwnerEvent) and f"{OwnerState.IDLE}" == "idle"


@pytest.mark.parametrize("lifecycle", ALL, ids=lambda lc: lc.name)
def test_every_undeclared_pair_is_illegal(lifecycle):
    for state in lifecycle.states:
        for event in lifecycle.events:
            if lifecycle.allows(state, event):
                assert lifecycle.next(state, event) in lifecycle.states
            else:
                with pytest.raises(IllegalTransition) as info:
                    lifecycle.next(state, event)
                assert info.value.code is Code.ILLEGAL_TRANSITION
                assert (info.value.state, info.value.event) == (state, event)


@pytest.mark.parametrize("lifecycle", ALL, ids=lambda lc: lc.name)
def test_terminal_states_have_no_way_out(lifecycle):
    for state in lifecycle.terminal:
        assert not any(lifecycle.allows(state, e) for e in lifecycle.events)


@requirement("delivery:uncertain:never-replayed")
def test_uncertain_task_is_never_dispatched_again():
    # The table itself forbids replay: nothing leads from uncertain back to pending.
    assert not any(TASK.allows("uncertain", e) for e in ("release", "claim_by_dispatch", "claim_by_receive"))
    assert not INFORMATION.allows("uncertain", "provider_visible")


def test_mermaid_is_generated_from_the_table():
    diagram = TASK.mermaid()
    assert diagram.startswith("stateDiagram-v2")
    assert diagram.count("-->") == len(TASK.transitions) + 1 + len(TASK.terminal)
    assert "dispatching --> pending: release" in diagram
    assert BINDING.mermaid().count("captured --> published: publish") == 1


def test_illegal_transition_in_the_store_changes_nothing(tmp_path):
    store = Store(tmp_path / "db")
    a, _ = store.registry.register_agent("a", "manual")
    b, _ = store.registry.register_agent("b", "manual")
    receipt = store.mailbox.admit_task(a, b, "work")
    before = store.dump()
    with pytest.raises(PeerwireError) as info:
        store.mailbox.release_claim(receipt["request_id"], "no claim to release")
    assert info.value.code is Code.ILLEGAL_TRANSITION
    assert store.dump() == before
    store.close()
