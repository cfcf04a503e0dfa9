"""The reference's provisioner: the suite's default, driving peerwire's reference core.

:class:`ReferenceProvisioner` implements :class:`harness.contract.interface.Provisioner`
with ``peerwire app --home H`` as a real subprocess and ``register_agent``
over the control socket. Unlike the interface, it needs peerwire installed.
"""

from __future__ import annotations

import os
import secrets
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from peerwire.control import ControlClient
from peerwire.home import HOME_ENV, SESSION_ENV, Home

from harness.contract.interface import UNAVAILABLE, Caller
from harness.process.app import AppProcess
from harness.process.jobs import Spawn


REGISTER_WAIT_S = 50.0
"""Added to the control client's own grace: how long a registration may take before the provisioner gives up.
A safety net against a hung app, far above the milliseconds one takes: on a 2-core machine at a load average
of 26 one took over the grace's 10 s alone, and failed a requirement that had not yet begun."""


@dataclass
class ReferenceProvisioner:
    """Provisions peerwire's reference core in ``root`` (a fresh directory).

    The reference's app is the one process that writes the home's store: its
    :meth:`crash` kills the app (SIGKILL) and starts it again, and leaves the
    suite's server processes alone (they hold no state; their calls fail with
    ``app_unavailable`` until the app is back). ``restart``, ``stop_app`` and
    ``start_app`` are the reference's own names for the same, kept for its tests.
    """

    capabilities: ClassVar[frozenset[str]] = frozenset({UNAVAILABLE})
    agent_kinds: ClassVar[tuple[str, ...]] = ("manual", "codex")

    root: Path
    app: AppProcess | None = None
    callers: list[Caller] = field(default_factory=list)
    env: Mapping[str, str] | None = None
    """Added to the app's environment (and so to everything it starts)."""
    spawn: Spawn | None = None
    """How the app is started (default: a subprocess in a session of its own)."""
    source: str = "suite"
    """Who registered the agents, as the core records it."""

    @property
    def home(self) -> Home:
        return Home(self.root / "home")

    def start(self) -> None:
        self.app = self._start_app()

    def _start_app(self) -> AppProcess:
        return AppProcess.start(self.home, env=dict(self.env or {}), spawn=self.spawn)

    def register(self, name: str, *, provider: str = "manual", aliases: tuple[str, ...] = (),
                 collab_root: bool = False) -> Caller:
        if collab_root and provider == "manual":
            provider = "codex"  # a tree's root is a Codex agent: only Codex has native collaboration
        out = ControlClient(self.home).call(
            "register_agent", {"name": name, "provider": provider, "aliases": list(aliases), "source": self.source,
                               "collab_root": collab_root}, wait_s=REGISTER_WAIT_S)
        caller = Caller(name=name, agent_id=out["agent"]["agent_id"], token=out["session_token"],
                        provider=provider, aliases=tuple(aliases))
        self.callers.append(caller)
        return caller

    def caller_env(self, caller: Caller) -> dict[str, str]:
        return {HOME_ENV: str(self.home.path), SESSION_ENV: caller.token}

    def restart(self) -> None:
        assert self.app is not None
        self.app.kill()
        self.app = self._start_app()

    def crash(self, server_pids: Sequence[int]) -> None:
        """Kill the app as a crash would (SIGKILL) and start it on the same home."""
        self.restart()

    def make_unavailable(self) -> None:
        self.stop_app()

    def make_available(self) -> None:
        self.start_app()

    def stop_app(self) -> None:
        assert self.app is not None
        self.app.terminate()
        self.app = None

    def start_app(self) -> None:
        assert self.app is None, "the app is running"
        self.app = self._start_app()

    # Optional hooks (see harness.contract.interface): hang the app, change an agent's flags.

    def freeze(self) -> None:
        assert self.app is not None
        os.kill(self.app.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        if self.app is not None and self.app.process.poll() is None:
            os.kill(self.app.process.pid, signal.SIGCONT)

    def set_agent(self, caller: Caller, *, enabled: bool | None = None, sendable: bool | None = None) -> None:
        flags = {k: v for k, v in (("enabled", enabled), ("sendable", sendable)) if v is not None}
        ControlClient(self.home).call("set_agent", {"agent_id": caller.agent_id, **flags})

    def stranger_env(self) -> dict[str, str]:
        return {HOME_ENV: str(self.home.path), SESSION_ENV: secrets.token_urlsafe(32)}

    def stop(self) -> None:
        if self.app is not None:
            self.app.terminate()
            self.app = None
