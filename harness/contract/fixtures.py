"""Pytest fixtures of the contract suite.

Used by :mod:`harness.contract.plugin` and by ``tests/contract/conftest.py``
(which runs the suite against the reference inside the project's own tests).
Options are read with defaults, so the fixtures work with or without the
plugin's command-line options registered: without them the target is the
reference core.
"""

from __future__ import annotations

import json
import secrets
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from harness.contract.interface import Caller, Provisioner

from .cases import Case
from .endpoints import RawEndpoint
from .isolation import Isolation, LeasedEndpoint, Placement, SessionPools, SharedSessions, needs_of
from .limits import limits
from .manifest import ALSO_ATTRIBUTE, FRESH_HOME, REQUIREMENT_ATTRIBUTE, manifest
from .target import Target
from .verdicts import ItemInfo, VoteRecorder

VOTES_KEY = pytest.StashKey[VoteRecorder]()


def item_info(item: pytest.Item) -> ItemInfo | None:
    """The requirement an item verifies: its ``@requirement``, else its case's; ``None`` if neither."""
    function = getattr(item, "function", None)
    declared = getattr(function, REQUIREMENT_ATTRIBUTE, None)
    also = tuple(getattr(function, ALSO_ATTRIBUTE, ()) or ())
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("case") if callspec is not None else None
    case_id = case.id if isinstance(case, Case) else None
    if declared:
        return ItemInfo(item=item.nodeid, requirement=declared, case=case_id, also=also)
    if isinstance(case, Case):
        return ItemInfo(item=item.nodeid, requirement=case.requirement, case=case_id)
    return None


@pytest.fixture(scope="session")
def contract_target(pytestconfig: pytest.Config) -> Target:
    """The implementation under test: the reference unless the command-line options name another."""
    return Target.from_options(pytestconfig.getoption("--server-cmd", default=None),
                               pytestconfig.getoption("--provisioner", default=None),
                               pytestconfig.getoption("--collab-server-cmd", default=None),
                               call_tools=pytestconfig.getoption("--call-tools", default=None),
                               tool_calls=pytestconfig.getoption("--tool-call", default=None) or ())


@pytest.fixture(scope="session")
def isolation(pytestconfig: pytest.Config) -> Isolation:
    """What tests share (``--isolation``; default: shared)."""
    return Isolation(pytestconfig.getoption("--isolation", default=None) or Isolation.SHARED)


def placement(request: pytest.FixtureRequest) -> Placement:
    """Where the requesting test runs: its requirements' ``needs`` (and its case's own) under ``--isolation``."""
    info = item_info(request.node)
    needs = needs_of(manifest(), (info.requirement, *info.also)) if info is not None else set()
    callspec = getattr(request.node, "callspec", None)
    case = callspec.params.get("case") if callspec is not None else None
    if isinstance(case, Case) and case.needs_own_app:
        needs.add(FRESH_HOME)
    return Placement.of(request.getfixturevalue("isolation"), needs)


@pytest.fixture(scope="session")
def shared_app(contract_target: Target, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provisioner]:
    """One provisioned home per test process, shared by every test that leaves it alone."""
    _require_provisioner(contract_target)
    provisioner = contract_target.new_provisioner(tmp_path_factory.mktemp("shared-app"))
    provisioner.start()
    yield provisioner
    provisioner.stop()


@pytest.fixture(scope="session")
def session_pools(contract_target: Target, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionPools]:
    """The shared sessions of this test process (:mod:`harness.contract.isolation`), stopped at its end."""
    pools = SessionPools(contract_target, tmp_path_factory.mktemp("shared-sessions"))
    yield pools
    pools.close()


def _require_provisioner(target: Target) -> None:
    if target.provisioner is None:
        pytest.skip("not tested: the target has no provisioner (--provisioner), so only the protocol profile runs")


@contextmanager
def _own_home(target: Target, root: Path) -> Iterator[Provisioner]:
    """A provisioned home of the test's own, stopped when it ends."""
    _require_provisioner(target)
    provisioner = target.new_provisioner(root)
    provisioner.start()
    try:
        yield provisioner
    finally:
        thaw = getattr(provisioner, "thaw", None)  # an optional hook: a test that hung the app may have failed
        if thaw is not None:
            thaw()
        provisioner.stop()


def _shared_home(request: pytest.FixtureRequest, where: Placement) -> tuple[Provisioner, SharedSessions | None]:
    """The shared home, and its shared sessions if the test may lease them (the app first: it stops last)."""
    provisioner = request.getfixturevalue("shared_app")
    sessions = request.getfixturevalue("session_pools").of(provisioner) if where.shares else None
    return provisioner, sessions


@pytest.fixture
def case_app(request: pytest.FixtureRequest, contract_target: Target, tmp_path: Path) -> Iterator[Provisioner]:
    """The home a case runs in: its own when it crashes the implementation, makes it unavailable or builds a
    collaboration tree (or under ``--isolation fresh``), else the shared one."""
    if placement(request).fresh_home:
        with _own_home(contract_target, tmp_path / "app") as provisioner:
            yield provisioner
    else:
        yield request.getfixturevalue("shared_app")


@pytest.fixture
def case_sessions(request: pytest.FixtureRequest, case_app: Provisioner) -> SharedSessions | None:
    """The shared sessions a case's actors that only need a caller may lease (``None``: every actor its own)."""
    where = placement(request)
    if where.fresh_home or not where.shares:
        return None
    return request.getfixturevalue("session_pools").of(case_app)


@pytest.fixture
def votes(request: pytest.FixtureRequest) -> VoteRecorder:
    """The current item's vote recorder (the plugin reports its votes)."""
    info = item_info(request.node)
    recorder = VoteRecorder(item=request.node.nodeid, case=info.case if info else None)
    request.node.stash[VOTES_KEY] = recorder
    return recorder


class Servers:
    """Starts the target's server for callers of a home; stops (or hands back) every one at teardown.

    ``start(caller)`` starts a server process for that caller. ``start()`` with no caller, environment or
    other handshake is a session for *a* caller: with ``sessions`` it is leased from the shared ones
    (already initialized; :class:`~harness.contract.isolation.LeasedEndpoint`), else a new caller's own.
    """

    def __init__(self, target: Target, provisioner: Provisioner, workdir: Path, *,
                 sessions: SharedSessions | None = None, requirement: str | None = None):
        self.target = target
        self.provisioner = provisioner
        self.workdir = workdir
        self.sessions = sessions
        self.requirement = requirement
        self._started: list[RawEndpoint] = []

    @property
    def endpoints(self) -> tuple[RawEndpoint, ...]:
        """Every server started (or session leased) so far, in order."""
        return tuple(self._started)

    def caller(self, stem: str = "caller") -> Caller:
        """A newly registered caller with a name unique to this run."""
        return self.provisioner.register(f"{stem}-{secrets.token_hex(3)}")

    def start(self, caller: Caller | None = None, *, env: dict[str, str] | None = None,
              handshake: bool = True, profile: str = "messaging") -> RawEndpoint:
        """The ``profile``'s server running as ``caller`` (any caller if omitted: a shared session where the
        test may lease one), or with exactly ``env``."""
        if caller is None and env is None and handshake and profile == "messaging" and self.sessions is not None:
            return self._lease(profile)
        if env is None:
            env = self.target.server_env(self.provisioner.caller_env(caller or self.caller()))
        return self._launch(self.target.server_cmd_for(profile), env, handshake)

    def _lease(self, profile: str, version: str | None = None) -> RawEndpoint:
        assert self.sessions is not None
        lease = self.sessions.lease(profile, **({"version": version} if version else {}),
                                    requirement=self.requirement)
        self._started.append(lease)
        return lease

    def _launch(self, argv, env: dict[str, str], handshake: bool, version: str | None = None) -> RawEndpoint:
        stderr = self.workdir / f"server-{len(self._started) + 1}.stderr.log"
        endpoint = RawEndpoint.open(argv, env, stderr=stderr)
        self._started.append(endpoint)
        if handshake:
            endpoint.handshake(**({"version": version} if version else {}))
        return endpoint

    def bare_env(self) -> dict[str, str]:
        """The suite's environment without any caller variable (no home, no credential)."""
        return self.target.bare_env(self.provisioner, self.caller("probe"))

    def close(self) -> None:
        leased = [e for e in self._started if isinstance(e, LeasedEndpoint)]
        own = [e for e in self._started if not isinstance(e, LeasedEndpoint)]
        for endpoint in leased:
            endpoint.close()
        # Each server of its own may take its close grace to exit: they close side by side, not in turn.
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(own)))) as pool:
            list(pool.map(lambda endpoint: endpoint.close(), own))


class ProtocolServers(Servers):
    """Servers for the protocol profile: any MCP stdio server, with or without a provisioner.

    With a provisioner, each runs as a newly registered caller of the shared app
    (so the calls the run may make succeed); without one, with the suite's own
    environment. The protocol profile's tests negotiate the newest published
    revision they know (:data:`NEWEST`) unless they ask for another.
    """

    NEWEST = "2025-11-25"

    def __init__(self, target: Target, provisioner: Provisioner | None, workdir: Path, *,
                 sessions: SharedSessions | None = None, requirement: str | None = None):
        super().__init__(target, provisioner, workdir, sessions=sessions,  # type: ignore[arg-type]
                         requirement=requirement)

    def start(self, caller: Caller | None = None, *, env: dict[str, str] | None = None,
              handshake: bool = True, profile: str = "messaging", version: str | None = None) -> RawEndpoint:
        if caller is None and env is None and handshake and self.sessions is not None:
            return self._lease("protocol", version or self.NEWEST)
        if env is None:
            env = self.target.server_env(self.provisioner.caller_env(caller or self.caller("protocol"))
                                         if self.provisioner is not None else {})
        return self._launch(self.target.server_cmd, env, handshake, version or self.NEWEST)


@pytest.fixture
def protocol(request: pytest.FixtureRequest, contract_target: Target, tmp_path: Path) -> Iterator[ProtocolServers]:
    """Servers for the protocol profile's tests (callers of the shared home when the target has a provisioner;
    with none, the suite's own environment), leased from the shared sessions where the test may."""
    where = placement(request)
    with ExitStack() as stack:
        provisioner: Provisioner | None = None
        sessions: SharedSessions | None = None
        if contract_target.provisioner is not None and where.fresh_home:
            provisioner = stack.enter_context(_own_home(contract_target, tmp_path / "own-app"))
        elif contract_target.provisioner is not None:
            provisioner, sessions = _shared_home(request, where)
        elif where.shares:
            sessions = request.getfixturevalue("session_pools").of(None)
        started = ProtocolServers(contract_target, provisioner, tmp_path, sessions=sessions,
                                  requirement=_requirement(request))
        stack.callback(started.close)
        yield started


def _requirement(request: pytest.FixtureRequest) -> str | None:
    info = item_info(request.node)
    return info.requirement if info is not None else None


def call_s() -> float:
    """How long one answer may take once a server is up (``--call-timeout``)."""
    return limits().call_s


@pytest.fixture
def servers(request: pytest.FixtureRequest, contract_target: Target, tmp_path: Path) -> Iterator[Servers]:
    """Servers on the shared home, or on one of the test's own when its requirement needs ``fresh-home``."""
    where = placement(request)
    with ExitStack() as stack:
        if where.fresh_home:
            provisioner, sessions = stack.enter_context(_own_home(contract_target, tmp_path / "own-app")), None
        else:
            provisioner, sessions = _shared_home(request, where)
        started = Servers(contract_target, provisioner, tmp_path, sessions=sessions,
                          requirement=_requirement(request))
        stack.callback(started.close)
        yield started


@pytest.fixture
def tree_servers(contract_target: Target, tmp_path: Path) -> Iterator[Servers]:
    """Servers on an app of its own, for the collab profile (a home holds one tree)."""
    provisioner = contract_target.new_provisioner(tmp_path / "tree-app")
    provisioner.start()
    started = Servers(contract_target, provisioner, tmp_path)
    try:
        yield started
    finally:
        started.close()
        provisioner.stop()


@pytest.fixture
def own_servers(contract_target: Target, tmp_path: Path) -> Iterator[Servers]:
    """Servers on a home of their own, whatever the requirement declares (``servers`` with ``fresh-home``
    declared is the same): for a test that crashes, hangs, stops or changes the implementation."""
    with _own_home(contract_target, tmp_path / "own-app") as provisioner:
        started = Servers(contract_target, provisioner, tmp_path)
        try:
            yield started
        finally:
            started.close()


def tool_call(endpoint: RawEndpoint, name: str, arguments: Any, *, timeout: float | None = None):
    """A blocking tools/call through a raw endpoint; the outcome's ``failure`` says if none came.

    ``timeout`` defaults to ``--call-timeout`` plus any wait the arguments ask for (``timeout_ms``)."""
    if timeout is None:
        waits = arguments.get("timeout_ms") if isinstance(arguments, dict) else None
        extra = waits / 1000 if isinstance(waits, (int, float)) and not isinstance(waits, bool) and waits > 0 else 0
        timeout = limits().call_s + min(extra, 60.0)
    return endpoint.call_tool(name, arguments, timeout=timeout).outcome(timeout)


def succeed(endpoint: RawEndpoint, name: str, arguments: Any, *, timeout: float | None = None) -> dict:
    """The structuredContent of a call that must succeed; an AssertionError showing the answer otherwise."""
    outcome = tool_call(endpoint, name, arguments, timeout=timeout)
    assert outcome.result is not None and not outcome.is_error and isinstance(outcome.structured, dict), \
        f"{name} {json.dumps(arguments, ensure_ascii=False)[:200]} should succeed: {outcome.response or outcome.failure}"
    return outcome.structured
