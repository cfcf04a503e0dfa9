"""The provisioner of the core with no app: a folder, a store, callers; a crash kills the sessions that write.

It imports the suite's interface and the store's schema (``store.py`` beside
it), nothing of peerwire's. There is no app to start, stop or make
unavailable, so it declares no capability; every server process writes the
store itself, so :meth:`crash` SIGKILLs the server processes the suite gives
it, mid-write, and the store comes back as SQLite left it.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
from pathlib import Path
from typing import ClassVar, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import store  # noqa: E402

from harness.contract.interface import Caller  # noqa: E402


class AppLessProvisioner:
    """One home in ``root``; nothing runs between calls."""

    capabilities: ClassVar[frozenset[str]] = frozenset()
    agent_kinds: ClassVar[tuple[str, ...]] = ("manual", "scheduled")
    """``scheduled``: an agent whose turns a scheduler would run; this core runs none, so none is ever active."""

    def __init__(self, root: Path):
        self.home = Path(root) / "home"

    def start(self) -> None:
        store.create(str(self.home))

    def register(self, name: str, *, provider: str = "manual", aliases: tuple[str, ...] = ()) -> Caller:
        agent_id, token = store.register(str(self.home), name, provider, tuple(aliases))
        return Caller(name=name, agent_id=agent_id, token=token, provider=provider, aliases=tuple(aliases))

    def caller_env(self, caller: Caller) -> dict[str, str]:
        return {"APPLESS_HOME": str(self.home), "APPLESS_TOKEN": caller.token}

    def stranger_env(self) -> dict[str, str]:
        return {"APPLESS_HOME": str(self.home), "APPLESS_TOKEN": secrets.token_urlsafe(24)}

    def crash(self, server_pids: Sequence[int]) -> None:
        for pid in server_pids:  # each leads its own process group: the session and anything it started
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self) -> None:
        pass
