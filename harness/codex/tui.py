"""An agent's real Codex TUI under tmux, attached to its owner's app-server (mode ``attached_tui``).

The TUI runs ``codex --remote unix://SOCKET`` in a detached tmux session on a
tmux server of the lab's own (``tmux -L NAME``), in the agent's workspace with
its ``CODEX_HOME``: a person can ``tmux -L NAME attach -t AGENT`` and watch.
The runner only ever reads the screen (``capture-pane``); nothing is typed into
the composer, and :attr:`TuiSession.commands` lists every tmux command issued
so a test can show it. The tmux server is killed on :meth:`TuiSession.close`.

:data:`INTERRUPTED` is what the pinned Codex's TUI prints where a turn ended
interrupted (0.171.0: ``■ Conversation interrupted - ...``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

TMUX = "tmux"
INTERRUPTED = "Conversation interrupted"
SCREEN_COLUMNS, SCREEN_ROWS = 200, 60
HISTORY_LINES = 5000
COMMAND_TIMEOUT_S = 30.0
# Read by whichever command starts the lab's tmux server (agents start side by side): every pane keeps its
# scroll-back, and a TUI that exits leaves its last screen to capture.
_CONFIG = f"set-option -g history-limit {HISTORY_LINES}\nset-option -g remain-on-exit on\n"


class TuiError(RuntimeError):
    """tmux is missing, or a tmux command failed (the message names it)."""


def tmux_path() -> str:
    """The tmux executable; TuiError naming the set-up step when there is none."""
    found = shutil.which(TMUX)
    if found is None:
        raise TuiError("attached_tui needs tmux on PATH (Debian: apt-get install -y tmux; `make setup` does it)")
    return found


@dataclass
class TuiSession:
    """The tmux server of one lab, holding one session per agent's TUI (named after the agent).

    ``folder`` holds the server's configuration; the server itself is named ``server`` (``tmux -L``)."""

    server: str
    folder: Path
    commands: list[list[str]] = field(default_factory=list)
    """Every tmux command issued, without the executable and the server options: a test shows nothing
    was typed."""
    agents: list[str] = field(default_factory=list)
    """The agents whose TUI was started, in order."""

    def _tmux(self, *args: str) -> str:
        self.commands.append(list(args))
        config = self.folder / "tmux.conf"
        command = [tmux_path(), "-L", self.server, "-f", os.fspath(config), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        if done.returncode != 0:
            raise TuiError(f"tmux {args[0]} failed ({done.returncode}): {done.stderr.strip()[:500]}")
        return done.stdout

    def start(self, agent: str, *, codex: str, socket: Path, codex_home: Path, workspace: Path,
              env: Mapping[str, str]) -> None:
        """Start ``agent``'s TUI: ``codex --remote unix://socket`` in ``workspace`` with ``env`` added."""
        (self.folder / "tmux.conf").write_text(_CONFIG, encoding="utf-8")
        assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in
                               {**env, "CODEX_HOME": os.fspath(codex_home), "TERM": "xterm-256color"}.items())
        command = (f"cd {shlex.quote(os.fspath(workspace))} && exec env {assignments} "
                   f"{shlex.quote(codex)} --remote {shlex.quote('unix://' + os.fspath(socket))}")
        self.agents.append(agent)
        self._tmux("new-session", "-d", "-s", agent, "-x", str(SCREEN_COLUMNS), "-y", str(SCREEN_ROWS), command)

    def screen(self, agent: str) -> str:
        """What ``agent``'s TUI shows, with its scroll-back (``capture-pane -p -J``, wrapped lines joined)."""
        return self._tmux("capture-pane", "-p", "-J", "-S", f"-{HISTORY_LINES}", "-t", f"={agent}:")

    def pane(self, agent: str) -> dict[str, object]:
        """Whether ``agent``'s TUI is still running (``alive``) and, once it exited, its ``exit_status``."""
        dead, status = self._tmux("display-message", "-p", "-t", f"={agent}:",
                                  "#{pane_dead}|#{pane_dead_status}").strip().split("|", 1)
        return {"alive": dead != "1", "exit_status": int(status) if status.strip().lstrip("-").isdigit() else None}

    def wait_for_text(self, agent: str, texts: list[str], timeout_s: float) -> str:
        """The screen once it shows every one of ``texts``; TuiError naming what is missing after ``timeout_s``.

        A terminal screen has no change event to block on, so this polls capture-pane, bounded.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            screen = self.screen(agent)
            missing = [t for t in texts if t not in screen]
            if not missing:
                return screen
            if time.monotonic() > deadline:
                raise TuiError(f"{agent}'s TUI did not show {missing!r} within {timeout_s:.0f}s")
            time.sleep(0.2)

    def close(self) -> None:
        """Kill the lab's tmux server and every TUI in it (nothing to do without tmux)."""
        if shutil.which(TMUX) is None:
            return
        subprocess.run([TMUX, "-L", self.server, "kill-server"], capture_output=True, timeout=COMMAND_TIMEOUT_S)
