import itertools

import pytest

from peerwire.errors import Code, PeerwireError
from peerwire.registry_rules import AgentRow, resolve_target, validate_name

_order = itertools.count(1)


def row(name, *, agent_id=None, identity=None, aliases=(), enabled=True, sendable=True):
    n = next(_order)
    agent_id = agent_id or f"00000000-0000-4000-8000-{n:012d}"
    return AgentRow(agent_id=agent_id, identity_key=identity or agent_id, name=name, aliases=tuple(aliases),
                    provider="manual", provider_session_id=None, node_id="n", enabled=enabled,
                    sendable=sendable, generation=0, status="registered", source="test",
                    created_at="t", updated_at="t", last_error=None, row_order=n)


def code_of(rows, target):
    with pytest.raises(PeerwireError) as info:
        resolve_target(rows, target)
    return info.value


def test_exact_agent_id_wins_over_names():
    a = row("alpha")
    b = row(a.agent_id)  # a name equal to another agent's id cannot be registered, but resolution is exact
    assert resolve_target([a, b], a.agent_id) is a


def test_name_and_alias():
    a = row("alpha", aliases=["al"])
    assert resolve_target([a], "alpha") is a
    assert resolve_target([a], "al") is a


def test_names_are_exact():
    a = row("alpha")
    assert code_of([a], "Alpha").code is Code.UNKNOWN_TARGET
    assert code_of([a], "alpha ").code is Code.UNKNOWN_TARGET


def test_two_identities_with_one_name_are_ambiguous():
    a, b = row("dup"), row("dup")
    err = code_of([a, b], "dup")
    assert err.code is Code.AMBIGUOUS_TARGET
    assert {c["agent_id"] for c in err.details["candidates"]} == {a.agent_id, b.agent_id}


def test_alias_colliding_with_another_agents_name_is_ambiguous():
    a, b = row("x"), row("y", aliases=["x"])
    assert code_of([a, b], "x").code is Code.AMBIGUOUS_TARGET


def test_newest_row_wins_within_one_identity():
    old = row("svc", identity="codex:thread-1")
    new = row("svc", identity="codex:thread-1")
    assert resolve_target([new, old], "svc") is new


def test_sendable_rows_are_preferred_over_merely_enabled_ones():
    quiet = row("svc", sendable=False)
    live = row("svc")
    assert resolve_target([quiet, live], "svc") is live


def code_of_strict(rows, target):
    with pytest.raises(PeerwireError) as info:
        resolve_target(rows, target, strict=True)
    return info.value


def test_a_disabled_agent_is_never_a_target():
    a = row("a", enabled=False)
    for code in (code_of([a], "a"), code_of([a], a.agent_id), code_of_strict([a], "a")):
        assert code.code is Code.TARGET_NOT_SENDABLE


def test_without_a_sendable_match_resolution_falls_back_to_an_enabled_agent():
    quiet = row("q", aliases=["quiet"], sendable=False)
    assert resolve_target([quiet], "q") is quiet
    assert resolve_target([quiet], "quiet") is quiet
    assert resolve_target([quiet], quiet.agent_id) is quiet


def test_strict_resolution_refuses_the_fallback():
    quiet = row("q", aliases=["quiet"], sendable=False)
    for target in ("q", "quiet", quiet.agent_id):
        error = code_of_strict([quiet], target)
        assert error.code is Code.TARGET_NOT_SENDABLE and error.details["sendable"] is False


def test_strict_resolution_still_takes_a_sendable_agent():
    quiet, live = row("svc", sendable=False), row("svc")
    assert resolve_target([quiet, live], "svc", strict=True) is live


def test_two_enabled_identities_without_a_sendable_one_are_ambiguous():
    a, b = row("svc", sendable=False), row("svc", sendable=False)
    assert code_of([a, b], "svc").code is Code.AMBIGUOUS_TARGET


@pytest.mark.parametrize("target", ["*", "all", "ALL", ["a", "b"], ("a",)])
def test_broadcasts_are_refused(target):
    assert code_of([row("a")], target).code is Code.BROADCAST_NOT_SUPPORTED


@pytest.mark.parametrize("target", ["", "   ", None, 7])
def test_empty_or_non_string_target(target):
    assert code_of([row("a")], target).code is Code.INVALID_ARGUMENT


@pytest.mark.parametrize("name", ["all", "*", "peerwire", "", "-x", "a" * 65,
                                  "123e4567-e89b-42d3-a456-426614174000"])
def test_reserved_or_malformed_names_are_refused(name):
    with pytest.raises(PeerwireError) as info:
        validate_name(name)
    assert info.value.code is Code.INVALID_ARGUMENT


def test_valid_names():
    for name in ("Receiver Agent", "b", "agent.v2", "x@node"):
        assert validate_name(name) == name


def test_the_store_resolves_through_indexes_with_the_same_rules(tmp_path):
    """Resolution reads only the rows that can match, never the whole registry, and decides as the rules do."""
    from peerwire.store import Store

    store = Store(tmp_path / "peerwire.db")
    try:
        for n in range(50):
            store.registry.register_agent(f"filler-{n}", "manual", aliases=[f"f{n}"])
        svc, _ = store.registry.register_agent("svc", "manual", aliases=["service"])
        store.registry.register_agent("twin", "manual")
        store.registry.register_agent("twin", "manual")
        quiet, _ = store.registry.register_agent("quiet", "manual")
        store.registry.update_agent(quiet.agent_id, sendable=False)
        every = store.registry.agents()
        for target in ("svc", "service", svc.agent_id, "twin", "quiet", "nobody", "f7", "*", ["svc"], ""):
            for strict in (False, True):
                expected = outcome(lambda: resolve_target(every, target, strict=strict))
                assert outcome(lambda: store.registry.resolve(target, strict=strict)) == expected, (target, strict)
        plan = [row[3] for row in store.database.db.execute("EXPLAIN QUERY PLAN " + store.registry._CANDIDATES,
                                                            {"target": "svc"})]
        assert not [step for step in plan if step.startswith("SCAN")], plan
    finally:
        store.close()


def outcome(fn):
    try:
        return fn().agent_id
    except PeerwireError as exc:
        return exc.code
