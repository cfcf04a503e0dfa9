"""Provisioners: what the contract suite needs from an implementation under test.

A provisioner creates a home, starts the app that owns it, registers managed
callers and restarts the app on demand. The suite then launches the server
command once per caller with :meth:`Provisioner.caller_env` added to its
environment. For the collaboration profile it registers the tree's root
(``register(..., collab_root=True)``) on a provisioner of its own per case.
Another implementation plugs in its own provisioner by naming a class
``module:Class`` (``--provisioner``) that implements this interface.

The default, :class:`ReferenceProvisioner`, drives peerwire's reference core:
``peerwire app --home H`` as a real subprocess and ``register_agent`` over the
control socket.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from peerwire.control import ControlClient
from peerwire.home import HOME_ENV, SESSION_ENV, Home

from harness.process.app import AppProcess
from harness.process.jobs import Spawn


@dataclass(frozen=True)
class Caller:
    """A managed caller: a registered agent and its session credential."""

    name: str
    agent_id: str
    token: str
    provider: str = "manual"
    aliases: tuple[str, ...] = ()


class Provisioner(Protocol):
    """The contract between the suite and an implementation under test."""

    def start(self) -> None:
        """Create a fresh home and start the app; return once it accepts calls."""

    def register(self, name: str, *, provider: str = "manual", aliases: tuple[str, ...] = (),
                 collab_root: bool = False) -> Caller:
        """Register a managed caller and return its credential.

        ``collab_root``: make it the root (``/root``) of this home's collaboration
        tree, the caller the ``collab`` profile's cases act as. Only the suite's
        collab cases pass it, each on a provisioner of its own (one tree a home).
        An implementation without the collaboration profile need not accept it:
        run the suite with ``--profiles messaging``.
        """

    def caller_env(self, caller: Caller) -> dict[str, str]:
        """Environment variables the server command needs to act as ``caller``."""

    def restart(self) -> None:
        """Stop the app (as a crash would: SIGKILL) and start it again on the same home."""

    def stop_app(self) -> None:
        """Stop the app gracefully but keep its home, so that callers find it unavailable."""

    def start_app(self) -> None:
        """Start the app again on the same home after :meth:`stop_app`."""

    def stranger_env(self) -> dict[str, str]:
        """Environment for a caller the app does not know: the right home, an unknown credential."""

    def stop(self) -> None:
        """Stop the app gracefully and release everything."""


@dataclass
class ReferenceProvisioner:
    """Provisions peerwire's reference core in ``root`` (a fresh directory)."""

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
        out = ControlClient(self.home).call(
            "register_agent", {"name": name, "provider": provider, "aliases": list(aliases), "source": self.source,
                               "collab_root": collab_root})
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

    def stop_app(self) -> None:
        assert self.app is not None
        self.app.terminate()
        self.app = None

    def start_app(self) -> None:
        assert self.app is None, "the app is running"
        self.app = self._start_app()

    def stranger_env(self) -> dict[str, str]:
        return {HOME_ENV: str(self.home.path), SESSION_ENV: secrets.token_urlsafe(32)}

    def stop(self) -> None:
        if self.app is not None:
            self.app.terminate()
            self.app = None
