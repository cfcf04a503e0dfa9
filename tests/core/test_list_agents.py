"""``list_agents`` filters in SQL: a name prefix is an exact, case-sensitive range on the name index.

The filters keep the rules they had when the whole roster was read and filtered
in Python (the naive model below): only the newest row of each identity is a
peer, disabled rows are left out before the newest is chosen, in the order each
identity first registered. ``_`` and ``%`` are characters, not wildcards.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from peerwire.control import ControlClient
from peerwire.registry_rules import AgentRow
from peerwire.store import Store

from .conftest import call


def test_a_name_prefix_is_exact_in_case_and_has_no_wildcards(core):
    names = ["bob", "Bob", "bobby", "bo_b", "boxb", "b.o", "alice"]
    me, *_ = [core.register(name) for name in names]

    def listed(prefix: str) -> list[str]:
        return [a["name"] for a in call(core, me, "list_agents", {"name_prefix": prefix})["agents"]]

    assert listed("bo") == ["bob", "bobby", "bo_b", "boxb"]
    assert listed("Bo") == ["Bob"]
    assert listed("bo_") == ["bo_b"], "_ is a character, not any one character"
    assert listed("b%") == [], "% is a character, not any run of characters"
    assert listed("b_") == [] and listed("b.") == ["b.o"]
    assert listed("bob") == ["bob", "bobby"]
    assert listed("bobby!") == [] and listed("") == names
    assert listed("\U0010ffff") == [] and listed("~") == []


def test_filters_combine_with_the_newest_row_of_each_identity(core):
    me = core.register("me")
    operator = ControlClient(core.home)
    first = operator.call("register_agent", {"name": "worker-a", "provider_session_id": "s-1"})["agent"]
    again = operator.call("register_agent", {"name": "worker-b", "provider_session_id": "s-1"})["agent"]
    other = operator.call("register_agent", {"name": "worker-c"})["agent"]
    operator.call("set_agent", {"agent_id": other["agent_id"], "enabled": False})

    def listed(**args) -> list[tuple[str, int]]:
        return [(a["name"], a["generation"]) for a in call(core, me, "list_agents", args)["agents"]]

    assert listed(name_prefix="worker") == [("worker-b", 1)], "the newest row of an identity only"
    assert listed(name_prefix="worker-a") == [], "an older row is history, not a peer"
    assert listed(name_prefix="worker", include_disabled=True) == [("worker-b", 1), ("worker-c", 0)]
    assert listed(name_prefix="worker", provider="codex") == []
    assert listed(name_prefix="worker", provider="manual") == [("worker-b", 1)]
    assert first["agent_id"] != again["agent_id"]


def naive_peers(rows: list[AgentRow], prefix: str, provider: str | None, include_disabled: bool) -> list[str]:
    """What list_agents returned when it read every row and filtered in Python."""
    newest: dict[str, AgentRow] = {}
    for row in rows:
        if include_disabled or row.enabled:
            newest[row.identity_key] = row
    return [r.agent_id for r in newest.values() if r.name.startswith(prefix) and provider in (None, r.provider)]


names = st.text(alphabet="abAB_%.\U0010ffff\u00e9", min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(roster=st.lists(st.tuples(names, st.sampled_from(["manual", "codex"]), st.sampled_from([None, "s1", "s2"]),
                                 st.booleans()), max_size=12),
       prefix=st.text(alphabet="abAB_%.\U0010ffff\u00e9", max_size=3),
       provider=st.sampled_from([None, "manual", "codex"]), include_disabled=st.booleans())
def test_the_sql_filter_agrees_with_the_naive_one(roster, prefix, provider, include_disabled):
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        store = Store(Path(tmp) / "db")
        try:
            for name, kind, session, enabled in roster:
                row, _ = store.registry.register_agent(name, kind, provider_session_id=session)
                if not enabled:
                    store.registry.update_agent(row.agent_id, enabled=False)
            expected = naive_peers(store.registry.agents(), prefix, provider, include_disabled)
            found = store.registry.peers(name_prefix=prefix, provider=provider, include_disabled=include_disabled)
            assert [a.agent_id for a in found] == expected
            assert [a.aliases for a in found] == [store.registry.agent(a.agent_id).aliases for a in found]
        finally:
            store.close()


paths = st.lists(st.sampled_from(["a", "b", "a_", "A", "%", "\u00e9"]), min_size=1, max_size=3).map(
    lambda parts: "/root/" + "/".join(parts))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=st.lists(paths, unique=True, max_size=10), others=st.integers(0, 3),
       prefix=st.one_of(paths, st.sampled_from(["/", "/root", "/root/", "/ro", "/root/a/", "/root/_"])))
def test_the_tree_listing_reads_the_path_index_and_agrees_with_the_naive_filter(tree, others, prefix):
    """The collaboration profile's list_agents (path_prefix) and the tree's capacity check, in SQL."""
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        store = Store(Path(tmp) / "db")
        try:
            store.registry.register_agent("lead", "codex", path="/root")
            for path in tree:
                store.registry.register_agent(path, "codex", path=path)
            for i in range(others):
                store.registry.register_agent(f"plain-{i}", "manual")
            everyone = store.registry.agents()
            expected = sorted((a.path for a in everyone if a.path and (
                a.path == prefix or a.path.startswith(prefix.rstrip("/") + "/"))))
            assert [a.path for a in store.registry.in_tree(prefix)] == expected
            assert [a.path for a in store.registry.descendants("/root")] == sorted(
                a.path for a in everyone if a.path and a.path.startswith("/root/"))
        finally:
            store.close()
