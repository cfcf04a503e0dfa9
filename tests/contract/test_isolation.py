"""What keeps one requirement's test apart from another's in a shared home, and what a run declares it needs.

The declarations are data (``needs`` in ``requirements.toml``), checked when the
manifest and the cases load. The shared sessions are tried against the
reference with real processes: a lease sees nothing of an earlier lease's
exchange; a session a test left owing an answer is closed, never leased again;
a test that uses a shared session as only a fresh one may be used fails, naming
the declaration to add.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.contract import census
from harness.contract.cases import CaseError, load_cases
from harness.contract.fixtures import succeed
from harness.contract.isolation import Isolation, IsolationError, Placement, SharedSessions, needs_of
from harness.contract.manifest import (FRESH_HOME, FRESH_SERVER, ISOLATION_NEEDS, NEEDS, Manifest, ManifestError,
                                       Selection, load_manifest, manifest)
from harness.contract.reference import ReferenceProvisioner
from harness.contract.target import Target

from .conftest import run_contract
from .test_driver import SEND, _case, _write_cases

# -- declarations --------------------------------------------------------------------------------


def test_needs_of_isolation_are_declared_in_the_manifest_schema():
    schema = json.loads((Path(__file__).resolve().parents[2] / "contracts" / "requirements.schema.json")
                        .read_text("utf-8"))
    assert schema["$defs"]["requirement"]["properties"]["needs"]["items"]["enum"] == list(NEEDS)
    assert set(ISOLATION_NEEDS) == {FRESH_SERVER, FRESH_HOME} <= set(NEEDS)


def test_a_run_meets_isolation_needs_whatever_it_offers():
    """fresh-server and fresh-home say how a test is kept apart, not what a run must offer: they never
    deselect a requirement, while a capability the run lacks does."""
    fresh = next(r for r in manifest() if r.needs == (FRESH_SERVER,))
    both = manifest()["app:unavailable"]
    assert set(both.needs) == {"unavailable", FRESH_HOME}
    bare = Selection(offers=())
    assert bare.includes(fresh) and bare.lacks(fresh) == ()
    assert bare.lacks(both) == ("unavailable",) and not bare.includes(both)


def test_the_protocol_profile_cannot_need_a_home(tmp_path):
    path = tmp_path / "requirements.toml"
    path.write_text('[requirement."wire:x"]\nlevel = "MUST"\nprofile = "protocol"\n'
                    'source = "JSON-RPC 2.0 § 5 Response object"\nkeyword = "MUST"\n'
                    'quote = "The Server MUST reply."\nneeds = ["fresh-home"]\nbehaviour = "A server replies."\n',
                    "utf-8")
    with pytest.raises(ManifestError, match="the protocol profile has no home"):
        load_manifest(path)


def test_a_case_that_crashes_the_implementation_must_belong_to_a_requirement_needing_a_home(tmp_path):
    crash = _case([SEND, {"control": "crash"}], requirement="target:unknown")
    with pytest.raises(CaseError, match=r'needs \["fresh-home"\]'):
        load_cases(_write_cases(tmp_path / "cases", [crash]), manifest())
    declared = dataclasses.replace(manifest()["target:unknown"], needs=(FRESH_HOME,))
    with_need = Manifest(tuple(declared if r.id == declared.id else r for r in manifest()))
    (case,) = load_cases(_write_cases(tmp_path / "ok", [crash]), with_need)
    assert case.needs_own_app


@pytest.mark.parametrize("isolation, needs, fresh_home, fresh_server", [
    (Isolation.SHARED, (), False, False),
    (Isolation.SHARED, (FRESH_SERVER,), False, True),
    (Isolation.SHARED, (FRESH_HOME,), True, True),
    (Isolation.SHARED, ("unavailable",), False, False),
    (Isolation.FRESH, (), True, True),
])
def test_where_a_test_runs(isolation, needs, fresh_home, fresh_server):
    where = Placement.of(isolation, needs)
    assert (where.fresh_home, where.fresh_server, where.shares) == (fresh_home, fresh_server, not fresh_server)


def test_a_tests_needs_are_those_of_every_requirement_it_verifies():
    assert needs_of(manifest(), ["wire:ping"]) == set()
    assert needs_of(manifest(), ["wire:ping", "app:unavailable"]) == {"unavailable", FRESH_HOME}


# -- which actors of a case any caller can play ----------------------------------------------------

READ = {"id": "read", "actor": "bob", "call": "receive_messages", "arguments": {}}
TO_BOB = {**SEND, "arguments": {"target": {"$actor": "bob"}, "message": "hi"}}


@pytest.mark.parametrize("actors, steps, shareable", [
    ({"alice": {}, "bob": {}}, [TO_BOB, READ], {"alice"}),
    ({"alice": {"aliases": ["lead"]}, "bob": {}}, [TO_BOB, READ], set()),
    ({"alice": {"name": "twin"}, "bob": {"name": "twin"}}, [SEND], set()),
    ({"alice": {}, "bob": {}}, [TO_BOB, {**READ, "actor": "alice", "id": "own"}], set()),
    ({"alice": {}, "bob": {}}, [TO_BOB, {**TO_BOB, "id": "back", "actor": "bob",
                                         "arguments": {"target": {"$actor": "alice"}, "message": "x"}}], set()),
    ({"alice": {}, "bob": {}, "carol": {}}, [TO_BOB, {**TO_BOB, "id": "too", "actor": "carol"}, READ],
     {"alice", "carol"}),
    ({"alice": {}, "ghost": {"registered": False}}, [SEND, {**SEND, "id": "g", "actor": "ghost"}], {"alice"}),
    ({"alice": {}, "bob": {}}, [TO_BOB, {"control": "crash"}], set()),
])
def test_an_actor_is_shared_only_when_any_caller_could_play_it(tmp_path, actors, steps, shareable):
    """Addressed, reading its own mailbox, with aliases, sharing a name, not registered, or in a case that
    crashes the implementation: its own agent and session. Only saying something to others is any caller's."""
    requirement = "receipt:durable:app-crash" if any("control" in s for s in steps) else "target:unknown"
    (case,) = load_cases(_write_cases(tmp_path / "cases", [_case(steps, actors=actors, requirement=requirement)]),
                         manifest())
    assert case.shareable_actors == shareable


def test_an_actor_named_in_the_cases_values_is_not_shared(tmp_path):
    case = _case([TO_BOB, READ], actors={"alice": {}, "bob": {}}, values={"me": {"$actor": "alice"}})
    (loaded,) = load_cases(_write_cases(tmp_path / "cases", [case]), manifest())
    assert loaded.shareable_actors == frozenset()


# -- shared sessions, with real processes ----------------------------------------------------------

@pytest.fixture(scope="module")
def home(tmp_path_factory):
    provisioner = ReferenceProvisioner(tmp_path_factory.mktemp("isolation-home"))
    provisioner.start()
    yield provisioner
    provisioner.stop()


@pytest.fixture
def pool(home, tmp_path):
    sessions = SharedSessions(Target(), home, tmp_path)
    census.drain()
    yield sessions
    sessions.close()


def test_a_lease_sees_nothing_of_an_earlier_one(pool):
    first = pool.lease(requirement="wire:ping")
    first.server.send_line(b"not json")
    assert first.server.call("ping", timeout=10).get("result") == {}
    first.server.request("ping", msg_id="mine")[1].result(10)
    assert first.server.line_count >= 3 and first.server.responses_to("mine")
    first.close()
    second = pool.lease(requirement="wire:ping")
    assert second.shared is first.shared, "a healthy session is leased again"
    assert second.server.line_count == 0 and second.server.lines == [] and second.server.stray_lines() == []
    assert second.server.responses_to("mine") == [] and second.server.exchange() == []
    second.server.request("ping", msg_id="mine")[1].result(10)
    assert len(second.server.responses_to("mine")) == 1, "an id an earlier lease used is this lease's own"
    assert second.initialized and second.negotiated == first.negotiated
    second.close()
    launches, closed = census.drain()
    assert launches == {"shared": 1} and closed == []


def test_a_session_left_owing_an_answer_is_never_leased_again(pool):
    lease = pool.lease(requirement="wait:timeout:default")
    lease.server.request("tools/call", {"name": "wait_agent", "arguments": {"timeout_ms": 60_000}})
    assert lease.server.call("ping", timeout=10).get("result") == {}
    lease.close()
    after = pool.lease(requirement="wire:ping")
    assert after.shared is not lease.shared and not lease.shared.server.alive()
    after.close()
    launches, closed = census.drain()
    assert launches == {"shared": 2}
    assert len(closed) == 1 and closed[0].startswith("wait:timeout:default: it still owes answers to 1 request")


def test_a_session_whose_server_exited_is_replaced(pool):
    lease = pool.lease()
    lease.shared.server.process.kill()
    lease.shared.server.process.wait(10)
    lease.close()
    replacement = pool.lease()
    assert replacement.shared is not lease.shared and replacement.server.alive()
    assert succeed(replacement, "list_agents", {})["agents"], "the new session serves a registered caller"
    replacement.close()


@pytest.mark.parametrize("misuse, what", [
    (lambda lease: lease.server.process, "reaches for the server's process"),
    (lambda lease: lease.server.close(), "closes the session"),
    (lambda lease: lease.initialize("2025-03-26"), "initializes the session again"),
    (lambda lease: lease.server.send_line(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'),
     "sends initialize"),
    (lambda lease: lease.server.send_line(b'[{"jsonrpc":"2.0","id":2,"method":"initialize"}]'), "sends initialize"),
    (lambda lease: lease.server.call("initialize", {}, timeout=5), "sends initialize"),
    (lambda lease: lease.handshake(version="2025-03-26"), "the shared session negotiated"),
])
def test_using_a_shared_session_as_a_fresh_one_fails_and_names_the_declaration(pool, misuse, what):
    lease = pool.lease(requirement="wire:request:answered")
    with pytest.raises(IsolationError, match=what) as raised:
        misuse(lease)
    assert '[requirement."wire:request:answered"] needs = ["fresh-server"]' in str(raised.value)
    lease.close()
    assert pool.lease().shared is lease.shared, "a refused misuse leaves the session as it was"


def test_two_leases_at_once_are_two_callers(pool):
    """Two actors of one case that any caller can play are still two callers."""
    one, two = pool.lease(), pool.lease()
    assert one.shared is not two.shared and one.caller.agent_id != two.caller.agent_id
    receipt = succeed(one, "send_message", {"target": two.caller.name, "message": "from one"})
    assert receipt["recipient"]["agent_id"] == two.caller.agent_id
    one.close()
    two.close()


# -- the verdicts of a shared run are those of a fresh one -------------------------------------------

SELECTION = (
    "wire:ping", "wire:response:exactly-one",  # protocol: the shared session
    "wire:initialize:handshake", "wire:stdout:json-rpc-only",  # protocol: fresh-server (initialize, stdin closed)
    "wire:json:non-finite", "tools:list:names",  # messaging: a shared caller
    "target:unknown", "identity:sender:attributed",  # cases: actors any caller can play
    "receive:ack:acknowledges", "call:cancelled:claims-nothing",  # fresh agents beside a shared caller
    "receipt:durable:app-crash", "app:unavailable",  # fresh-home: a crash, the app stopped
    "collab:list:tree",  # collab: a home per case
)
"""A requirement of every kind of isolation."""


def _run(tmp_path: Path, isolation: str, selection) -> tuple[dict[str, str], dict]:
    args = [arg for rid in selection for arg in ("--requirement", rid)]
    (tmp_path / isolation).mkdir()
    run = run_contract(tmp_path / isolation, "--isolation", isolation, *args)
    assert run.returncode == 0, run.output[-3000:]
    return {r["id"]: r["result"] for r in run.compliance["requirements"]}, run.compliance["startup"]


@pytest.mark.slow
def test_a_shared_run_gives_the_verdicts_of_a_fresh_one_with_fewer_processes(tmp_path):
    shared, shared_started = _run(tmp_path, "shared", SELECTION)
    fresh, fresh_started = _run(tmp_path, "fresh", SELECTION)
    assert shared == fresh, {rid: (shared[rid], fresh.get(rid)) for rid in shared if shared[rid] != fresh.get(rid)}
    assert {shared[rid] for rid in SELECTION} == {"pass"}
    assert fresh_started["isolation"] == "fresh" and fresh_started["launches"]["shared"] == 0
    assert shared_started["launches"]["fresh"] < fresh_started["launches"]["fresh"]
    assert shared_started["processes"] < fresh_started["processes"], (shared_started, fresh_started)
    assert shared_started["launches"]["home"] < fresh_started["launches"]["home"]
    assert shared_started["closed_early"] == [], shared_started["closed_early"]


@pytest.mark.slow
def test_requirements_that_only_need_a_caller_start_no_server_of_their_own(tmp_path):
    """Protocol rules, tools/list and cases whose one actor any caller can play: the run starts one home and
    one shared session per negotiated revision (the protocol profile's and the messaging cases'), nothing else."""
    verdicts, started = _run(tmp_path, "shared", ("wire:ping", "wire:method:unknown", "wire:request:invalid",
                                                  "target:unknown", "tools:list:names", "tools:list:schemas"))
    assert {verdicts[rid] for rid in ("wire:ping", "target:unknown", "tools:list:schemas")} == {"pass"}
    assert started["launches"] == {**dict.fromkeys(census.LAUNCHES, 0), "shared": 2, "home": 1}, started
