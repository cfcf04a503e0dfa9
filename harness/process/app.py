"""The reference core's app as a subprocess: ``peerwire app --home H``.

:class:`AppProcess` starts it, waits for its JSON ready line and stops it
(SIGTERM with a bounded grace, then SIGKILL), or kills it as a crash would.
The acceptance runner starts it through its job; tests and the contract
suite's reference provisioner start it in a session of its own.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from peerwire.home import Home

from harness.process.jobs import Spawn

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


class AppNotReady(RuntimeError):
    pass


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
              spawn: Spawn | None = None, args: tuple[str, ...] = ()) -> "AppProcess":
        """Start ``peerwire app`` for ``home`` and wait for its JSON ready line (``{"event": "ready", ...}``).

        ``env`` is added to this process's environment; ``args`` follow ``peerwire app --home H``. ``spawn`` starts the
        process: by default a plain subprocess in its own session; the
        acceptance runner starts it through its job instead. Raises
        :class:`AppNotReady`, with the tail of the app's stderr log, when the app
        exits, stays silent for ``timeout`` seconds or prints anything but a
        ready line; the process is killed first.
        """
        home.create()
        log = home.path.parent / f"{home.path.name}.app-stderr.log"
        argv = [sys.executable, "-m", "peerwire", "app", "--home", str(home.path), *args]
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
