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
from pathlib import Path
from typing import Any, Iterator

import pytest

from harness.contract.interface import Caller, Provisioner

from .cases import Case
from .endpoints import RawEndpoint
from .limits import limits
from .manifest import ALSO_ATTRIBUTE, REQUIREMENT_ATTRIBUTE
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
def shared_app(contract_target: Target, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provisioner]:
    """One provisioned app per test process, shared by every case that leaves the app alone."""
    if contract_target.provisioner is None:
        pytest.skip("not tested: the target has no provisioner (--provisioner), so only the protocol profile runs")
    provisioner = contract_target.new_provisioner(tmp_path_factory.mktemp("shared-app"))
    provisioner.start()
    yield provisioner
    provisioner.stop()


@pytest.fixture
def case_app(request: pytest.FixtureRequest, contract_target: Target, tmp_path: Path) -> Iterator[Provisioner]:
    """The app a case runs against: its own when it stops or restarts the app, else the shared one."""
    case: Case = request.getfixturevalue("case")
    if not case.needs_own_app:
        yield request.getfixturevalue("shared_app")
        return
    provisioner = contract_target.new_provisioner(tmp_path / "app")
    provisioner.start()
    try:
        yield provisioner
    finally:
        provisioner.stop()


@pytest.fixture
def votes(request: pytest.FixtureRequest) -> VoteRecorder:
    """The current item's vote recorder (the plugin reports its votes)."""
    info = item_info(request.node)
    recorder = VoteRecorder(item=request.node.nodeid, case=info.case if info else None)
    request.node.stash[VOTES_KEY] = recorder
    return recorder


class Servers:
    """Starts the target's server for callers of the shared app; stops every one at teardown."""

    def __init__(self, target: Target, provisioner: Provisioner, workdir: Path):
        self.target = target
        self.provisioner = provisioner
        self.workdir = workdir
        self._started: list[RawEndpoint] = []

    @property
    def endpoints(self) -> tuple[RawEndpoint, ...]:
        """Every server started so far, in order."""
        return tuple(self._started)

    def caller(self, stem: str = "caller") -> Caller:
        """A newly registered caller with a name unique to this run."""
        return self.provisioner.register(f"{stem}-{secrets.token_hex(3)}")

    def start(self, caller: Caller | None = None, *, env: dict[str, str] | None = None,
              handshake: bool = True, profile: str = "messaging") -> RawEndpoint:
        """The ``profile``'s server running as ``caller`` (a new one if omitted), or with exactly ``env``."""
        if env is None:
            env = self.target.server_env(self.provisioner.caller_env(caller or self.caller()))
        return self._launch(self.target.server_cmd_for(profile), env, handshake)

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
        for endpoint in self._started:
            endpoint.close()


class ProtocolServers(Servers):
    """Servers for the protocol profile: any MCP stdio server, with or without a provisioner.

    With a provisioner, each runs as a newly registered caller of the shared app
    (so the calls the run may make succeed); without one, with the suite's own
    environment. The protocol profile's tests negotiate the newest published
    revision they know (:data:`NEWEST`) unless they ask for another.
    """

    NEWEST = "2025-11-25"

    def __init__(self, target: Target, provisioner: Provisioner | None, workdir: Path):
        super().__init__(target, provisioner, workdir)  # type: ignore[arg-type]

    def start(self, caller: Caller | None = None, *, env: dict[str, str] | None = None,
              handshake: bool = True, profile: str = "messaging", version: str | None = None) -> RawEndpoint:
        if env is None:
            env = self.target.server_env(self.provisioner.caller_env(caller or self.caller("protocol"))
                                         if self.provisioner is not None else {})
        return self._launch(self.target.server_cmd, env, handshake, version or self.NEWEST)


@pytest.fixture
def protocol(request: pytest.FixtureRequest, contract_target: Target, tmp_path: Path) -> Iterator[ProtocolServers]:
    """Servers for the protocol profile's tests (the shared app's callers when the target has a provisioner)."""
    provisioner = request.getfixturevalue("shared_app") if contract_target.provisioner is not None else None
    started = ProtocolServers(contract_target, provisioner, tmp_path)
    try:
        yield started
    finally:
        started.close()


def call_s() -> float:
    """How long one answer may take once a server is up (``--call-timeout``)."""
    return limits().call_s


@pytest.fixture
def servers(contract_target: Target, shared_app: Provisioner, tmp_path: Path) -> Iterator[Servers]:
    started = Servers(contract_target, shared_app, tmp_path)
    try:
        yield started
    finally:
        started.close()


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
    """Servers on an implementation of their own, for a test that crashes, hangs, stops or changes it (never the
    shared one)."""
    if contract_target.provisioner is None:
        pytest.skip("not tested: the target has no provisioner (--provisioner)")
    provisioner = contract_target.new_provisioner(tmp_path / "own-app")
    provisioner.start()
    started = Servers(contract_target, provisioner, tmp_path)
    try:
        yield started
    finally:
        started.close()
        thaw = getattr(provisioner, "thaw", None)  # an optional hook: a test that hung the app may have failed
        if thaw is not None:
            thaw()
        provisioner.stop()


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
