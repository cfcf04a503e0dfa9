"""Live progress of an acceptance run: one plain line per event on stderr.

Lines look like ``[task-reply-auto] A: turn 1 started``. Each line is
written with a single ``write`` so lines of scenarios running in parallel
worker processes never interleave mid-line.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class Progress:
    """Progress lines of one scenario run (``label`` is its bracketed prefix)."""

    def __init__(self, label: str, stream: TextIO | None = None, *, quiet: bool = False):
        self.label = label
        self.stream = stream
        self.quiet = quiet
        self._start = time.monotonic()
        self._lock = threading.Lock()

    def say(self, message: str) -> None:
        if self.quiet:
            return
        stream = self.stream if self.stream is not None else sys.stderr
        line = f"[{self.label}] {time.monotonic() - self._start:6.2f}s {message}\n"
        with self._lock:
            stream.write(line)
            stream.flush()
