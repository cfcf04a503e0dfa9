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

import json
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from peerwire.control import ControlClient
from peerwire.home import HOME_ENV, SESSION_ENV, Home

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


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


class AppNotReady(RuntimeError):
    pass


Spawn = Callable[[list[str], dict[str, str], IO[bytes]], subprocess.Popen]
"""Starts the app: ``(argv, environment, stderr file) -> process`` whose stdout is a pipe."""


def _own_session(argv: list[str], env: dict[str, str], stderr: IO[bytes]) -> subprocess.Popen:
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, env=env,
                            start_new_session=True)


@dataclass
class AppProcess:
    """A running ``peerwire app`` subprocess and the ready line it printed."""

    home: Home
    process: subprocess.Popen
    ready: dict
    log: Path

    @classmethod
    def start(cls, home: Home, *, env: dict[str, str] | None = None, timeout: float = READY_TIMEOUT_S,
              spawn: Spawn | None = None) -> "AppProcess":
        """Start ``peerwire app`` for ``home`` and wait for its JSON ready line (``{"event": "ready", ...}``).

        ``env`` is added to this process's environment. ``spawn`` starts the
        process: by default a plain subprocess in its own session; the
        acceptance runner starts it through its job instead. Raises
        :class:`AppNotReady`, with the tail of the app's stderr log, when the app
        exits, stays silent for ``timeout`` seconds or prints anything but a
        ready line; the process is killed first.
        """
        home.create()
        log = home.path.parent / f"{home.path.name}.app-stderr.log"
        argv = [sys.executable, "-m", "peerwire", "app", "--home", str(home.path)]
        with open(log, "ab") as err:
            process = (spawn or _own_session)(argv, {**os.environ, **(env or {})}, err)
        line = _read_line(process, timeout)
        ready = _ready(line)
        if ready is None:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
            raise AppNotReady(f"peerwire app was not ready (status {process.returncode}, first line {line[:200]!r}); "
                              f"see {log}:\n{log.read_text(errors='replace')[-2000:]}")
        return cls(home=home, process=process, ready=ready, log=log)

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close()
        return self.process.returncode

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._close()

    def _close(self) -> None:
        if self.process.stdout:
            self.process.stdout.close()


def _ready(line: bytes) -> dict[str, Any] | None:
    try:
        ready = json.loads(line)
    except ValueError:
        return None
    return ready if isinstance(ready, dict) and ready.get("event") == "ready" else None


def _read_line(process: subprocess.Popen, timeout: float) -> bytes:
    """One line from the child's stdout, or b"" if it exits or ``timeout`` passes."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\n" not in buf:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b""
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            return b""
        chunk = os.read(fd, 4096)
        if not chunk:
            return b""
        buf += chunk
    return buf.split(b"\n", 1)[0]


@dataclass
class ReferenceProvisioner:
    """Provisions peerwire's reference core in ``root`` (a fresh directory)."""

    root: Path
    app: AppProcess | None = None
    callers: list[Caller] = field(default_factory=list)

    @property
    def home(self) -> Home:
        return Home(self.root / "home")

    def start(self) -> None:
        self.app = AppProcess.start(self.home)

    def register(self, name: str, *, provider: str = "manual", aliases: tuple[str, ...] = (),
                 collab_root: bool = False) -> Caller:
        out = ControlClient(self.home).call(
            "register_agent", {"name": name, "provider": provider, "aliases": list(aliases), "source": "suite",
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
        self.app = AppProcess.start(self.home)

    def stop_app(self) -> None:
        assert self.app is not None
        self.app.terminate()
        self.app = None

    def start_app(self) -> None:
        assert self.app is None, "the app is running"
        self.app = AppProcess.start(self.home)

    def stranger_env(self) -> dict[str, str]:
        return {HOME_ENV: str(self.home.path), SESSION_ENV: secrets.token_urlsafe(32)}

    def stop(self) -> None:
        if self.app is not None:
            self.app.terminate()
            self.app = None
