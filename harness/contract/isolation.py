"""How one requirement's test is kept apart from another's: shared sessions, fresh processes, fresh homes.

A conformance suite can run against one live server: what keeps its tests apart
is that each makes its own agents, with names no other test uses, in a home
they share. The contract suite does the same (``--isolation shared``, the
default): each test process provisions one home for every test that leaves the
home alone, a test registers fresh agents in it, and a test that needs only *a
caller* (any registered agent, whose mailbox it never reads and whom nobody
addresses) is given a **shared session**: one server process per caller that
test after test leases, already initialized. Each fresh agent still has its own
server process, because the contract binds a session to its caller through the
process's environment.

A requirement whose test needs more says so in ``contracts/requirements.toml``
(``needs``), never through a test's name:

``fresh-server``
    its test changes or may end the session it talks to (an initialize variant,
    stdin closed, hostile input a server may drop the session for, a look at
    everything a session wrote since it started): it never gets a shared
    session. A test that misuses one anyway fails with :class:`IsolationError`,
    which names the declaration to add.
``fresh-home``
    its test crashes the implementation, makes it unavailable or spoils its home
    (a full disk, bad local state): it gets a home (a provisioner) of its own.
    A case with a ``crash`` or ``make_unavailable`` step must belong to such a
    requirement (``harness.contract.cases`` checks it); a collaboration case
    always gets its own home, because a home holds one tree.

``--isolation fresh`` gives every test a home and server processes of its own,
nothing shared: the reference point the shared run's verdicts are compared with.

A leased session shows its test only what happened during the lease (lines,
responses, stray output, the exchange and stderr since it began). Handing it
back, the suite checks it is still running, answers a ping and owes no answer
to any request; otherwise the session is closed, never leased again, and the
next test gets a new one. So a test sees no line of another's, and a session
one test broke breaks no other.
"""

from __future__ import annotations

import enum
import json
import secrets
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from harness.contract.interface import Caller, Provisioner

from .endpoints import PROTOCOL_VERSION, RawEndpoint
from .census import record_closed_early
from .limits import limits
from .manifest import FRESH_HOME, FRESH_SERVER, Manifest
from .stdio import Line, NoResponse, ServerExited, StdioServer, id_key, response_id, strict_json
from .target import Target

SHARED_STEM = "shared"
"""The name stem of a shared session's caller (each gets a unique suffix)."""


class Isolation(enum.StrEnum):
    """``--isolation``: what tests share."""

    SHARED = "shared"
    """One home per test process for the tests that leave it alone, and shared sessions for tests that only
    need a caller (the default)."""
    FRESH = "fresh"
    """A home and server processes of its own for every test."""


class IsolationError(RuntimeError):
    """A test used a shared session as only a fresh one may be used; the message names the declaration."""


@dataclass(frozen=True)
class Placement:
    """Where one test runs: on a home of its own or the shared one, and whether it may lease shared sessions."""

    fresh_home: bool
    fresh_server: bool

    @classmethod
    def of(cls, isolation: Isolation, needs: Iterable[str]) -> "Placement":
        needs = set(needs)
        if isolation is Isolation.FRESH:
            return cls(fresh_home=True, fresh_server=True)
        return cls(fresh_home=FRESH_HOME in needs, fresh_server=FRESH_SERVER in needs or FRESH_HOME in needs)

    @property
    def shares(self) -> bool:
        """Whether the test may lease the shared sessions of the shared home."""
        return not self.fresh_server


def needs_of(manifest: Manifest, requirement_ids: Iterable[str]) -> set[str]:
    """Everything the requirements a test verifies need."""
    return {need for rid in requirement_ids if rid in manifest for need in manifest[rid].needs}


def _declare(requirement: str | None, why: str) -> IsolationError:
    named = f"[requirement.\"{requirement}\"]" if requirement else "its requirement"
    return IsolationError(f"{why}: this session is shared with other tests. Declare it in "
                          f"contracts/requirements.toml: {named} needs = [\"{FRESH_SERVER}\"]")


class LeasedServer:
    """A shared :class:`StdioServer` as one test sees it: everything since its lease began, nothing before.

    Line indices (``line_count``, ``lines_since``, ``silence``) count from the lease's first line. Sending
    ``initialize``, closing the session and touching its process are refused with :class:`IsolationError`:
    they belong to a test that declared ``fresh-server``.
    """

    def __init__(self, server: StdioServer, requirement: str | None):
        self._server = server
        self._requirement = requirement
        self._first = server.line_count
        self._first_sent = server.sent_count
        self._since = time.monotonic()
        try:
            self._stderr_from = server.stderr_path.stat().st_size
        except OSError:
            self._stderr_from = 0
        self.argv = server.argv
        self.stderr_path = server.stderr_path
        self.started_at = server.started_at

    # -- what the test may do, as with its own session -----------------------------------

    def send_line(self, raw: bytes) -> None:
        if b"initialize" in raw and _initializes(raw):
            raise _declare(self._requirement, "the test sends initialize (an initialize variant)")
        self._server.send_line(raw)

    def send(self, message: Any) -> None:
        self.send_line(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))

    def request(self, method: str, params: Any = None, *, msg_id: Any = None):
        if method == "initialize":
            raise _declare(self._requirement, "the test sends initialize (an initialize variant)")
        return self._server.request(method, params, msg_id=msg_id)

    def notify(self, method: str, params: Any = None) -> None:
        self._server.notify(method, params)

    def expect_response(self, msg_id: Any):
        return self._server.expect_response(msg_id)

    def expect_line(self, predicate):
        return self._server.expect_line(predicate)

    def call(self, method: str, params: Any = None, *, timeout: float) -> dict:
        if method == "initialize":
            raise _declare(self._requirement, "the test sends initialize (an initialize variant)")
        return self._server.call(method, params, timeout=timeout)

    def alive(self) -> bool:
        return self._server.alive()

    def unanswered(self) -> list[Any]:
        """The ids of the requests this lease sent that no response has carried yet."""
        return self._server.unanswered(self._first_sent, self._first)

    # -- what it sees: the lease's part of the session ------------------------------------

    @property
    def lines(self) -> list[Line]:
        return self._server.lines_since(self._first)

    def lines_since(self, start: int) -> list[Line]:
        return self._server.lines_since(self._first + start)

    @property
    def line_count(self) -> int:
        return self._server.line_count - self._first

    def responses_to(self, msg_id: Any) -> list[dict]:
        key = id_key(msg_id)
        return [r for ln in self.lines for r in ln.responses if id_key(response_id(r)) == key]

    def stray_lines(self) -> list[Line]:
        return [ln for ln in self.lines if not ln.valid_under(self.revision)]

    @property
    def revision(self) -> str | None:
        return self._server.revision

    def silence(self, msg_id: Any, timeout: float, since: int) -> str:
        return self._server.silence(msg_id, timeout, self._first + since)

    def exchange(self, since: float | None = None, limit: int = 60) -> list[dict[str, Any]]:
        return self._server.exchange(self._since if since is None else max(since, self._since), limit)

    def stderr_tail(self, limit: int = 1500) -> str:
        try:
            with open(self.stderr_path, "rb") as err:
                err.seek(self._stderr_from)
                text = err.read().decode("utf-8", errors="replace")
        except OSError:
            return "no stderr"
        return "stderr: " + (text[-limit:].strip() or "(empty)")

    # -- what only a fresh session's test may do ---------------------------------------------

    @property
    def process(self):
        raise _declare(self._requirement, "the test reaches for the server's process (to close its stdin, "
                                          "signal or wait for it)")

    def exited_within(self, seconds: float) -> bool:
        raise _declare(self._requirement, "the test waits for the server to exit")

    def close(self, grace: float | None = None) -> int:
        raise _declare(self._requirement, "the test closes the session")


def _initializes(raw: bytes) -> bool:
    """Whether a line is (or holds, as a batch) an ``initialize`` request."""
    message = strict_json(raw)
    items = message if isinstance(message, list) else [message]
    return any(isinstance(m, dict) and m.get("method") == "initialize" for m in items)


class LeasedEndpoint(RawEndpoint):
    """A shared session leased to one test: a :class:`RawEndpoint` whose ``server`` is a :class:`LeasedServer`.

    It is initialized already (``initialized`` holds the answer, ``negotiated`` the revision); ``close()``
    hands it back to its pool.
    """

    def __init__(self, pool: "SharedSessions", key: tuple[str, str], shared: RawEndpoint, caller: Caller | None,
                 requirement: str | None):
        super().__init__(LeasedServer(shared.server, requirement))  # type: ignore[arg-type]
        self.pool = pool
        self.key = key
        self.shared = shared
        self.caller = caller
        self.negotiated = shared.negotiated
        self.initialized = shared.initialized
        self.requirement = requirement
        self._released = False

    def initialize(self, version: str = PROTOCOL_VERSION, timeout: float | None = None) -> dict[str, Any]:
        raise _declare(self.requirement, f"the test initializes the session again (asking for {version})")

    def first_request(self, method: str, params: Any = None, timeout: float | None = None) -> dict[str, Any]:
        raise _declare(self.requirement, f"the test makes {method} the session's first request")

    def handshake(self, timeout: float | None = None, version: str | None = None) -> dict[str, Any]:
        """The session was initialized when the pool started it: its answer, or an error if at another revision."""
        if version is not None and version != self.key[1]:
            raise _declare(self.requirement, f"the test asks for {version}, the shared session negotiated "
                                              f"{self.key[1]}")
        return self.initialized or {}

    def close(self) -> None:
        if not self._released:
            self._released = True
            self.pool.release(self)


class SharedSessions:
    """The shared sessions of one home (or, with no provisioner, of the suite's own environment).

    Sessions are keyed by profile and negotiated revision. A lease takes an idle one, or starts one for a
    newly registered caller; two leases held at once (two actors of one case) are two sessions.
    """

    def __init__(self, target: Target, provisioner: Provisioner | None, workdir: Path):
        self.target = target
        self.provisioner = provisioner
        self.workdir = workdir
        self._idle: dict[tuple[str, str], list[tuple[RawEndpoint, Caller | None]]] = defaultdict(list)
        self._every: list[RawEndpoint] = []

    @property
    def started(self) -> int:
        """How many server processes this pool has started."""
        return len(self._every)

    def lease(self, profile: str = "messaging", version: str = PROTOCOL_VERSION, *,
              requirement: str | None = None) -> LeasedEndpoint:
        key = (profile, version)
        while self._idle[key]:
            endpoint, caller = self._idle[key].pop()
            if endpoint.server.alive():
                return LeasedEndpoint(self, key, endpoint, caller, requirement)
            endpoint.close()
        endpoint, caller = self._launch(profile, version)
        return LeasedEndpoint(self, key, endpoint, caller, requirement)

    def _launch(self, profile: str, version: str) -> tuple[RawEndpoint, Caller | None]:
        caller = None
        if self.provisioner is not None:
            caller = self.provisioner.register(f"{SHARED_STEM}-{secrets.token_hex(4)}")
            env = self.target.server_env(self.provisioner.caller_env(caller))
        else:
            env = self.target.server_env({})
        argv = self.target.server_cmd if profile == "protocol" else self.target.server_cmd_for(profile)
        stderr = self.workdir / f"shared-{len(self._every) + 1}.stderr.log"
        endpoint = RawEndpoint.open(argv, env, stderr=stderr, launch="shared")
        self._every.append(endpoint)
        endpoint.handshake(version=version)
        return endpoint, caller

    def release(self, lease: LeasedEndpoint) -> None:
        """Take a lease back: the session is leased again only if it still runs, answers a ping, and has
        answered every request the lease sent; else it is closed and the next lease gets a new one."""
        shared = lease.shared
        why = self._unfit(shared.server, lease.server)
        if why is None:
            shared.server.forget_expectations()  # what the lease still expected will never come
            self._idle[lease.key].append((shared, lease.caller))
        else:
            record_closed_early(f"{lease.requirement or 'a test'}: {why}")
            shared.close()

    @staticmethod
    def _unfit(server: StdioServer, lease: LeasedServer) -> str | None:
        """Why a session cannot be leased again (``None``: it can)."""
        if not server.alive():
            return "the server exited"
        try:
            answer = server.call("ping", timeout=limits().call_s)
        except (NoResponse, ServerExited) as exc:
            return f"it did not answer a ping ({exc})"
        if answer.get("result") != {}:
            return f"it answered a ping with {answer}"
        owed = lease.unanswered()
        if owed:
            return f"it still owes answers to {len(owed)} request(s), first id {json.dumps(owed[0])[:80]}"
        return None

    def close(self) -> None:
        for endpoint in self._every:
            endpoint.close()
        self._idle.clear()


class SessionPools:
    """Every shared-session pool of one test process: one per shared home, one for the suite's own environment."""

    def __init__(self, target: Target, workdir: Path):
        self.target = target
        self.workdir = workdir
        self._pools: dict[int, SharedSessions] = {}

    def of(self, provisioner: Provisioner | None) -> SharedSessions:
        """The pool of ``provisioner``'s home, or of the suite's environment (``None``: no provisioner)."""
        key = id(provisioner) if provisioner is not None else 0
        pool = self._pools.get(key)
        if pool is None:
            workdir = self.workdir / f"pool-{len(self._pools) + 1}"
            workdir.mkdir(parents=True, exist_ok=True)
            pool = self._pools[key] = SharedSessions(self.target, provisioner, workdir)
        return pool

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
