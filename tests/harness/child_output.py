"""Reading what a child program reports, with a bound (shared by the harness tests)."""

from __future__ import annotations

import queue
import threading
from typing import IO


def read_line(stream: IO[bytes], timeout: float) -> str:
    """The next line a child writes to ``stream``; fails after ``timeout`` seconds.

    A reader thread rather than select(), which takes no pipes on Windows.
    """
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"no line from the child within {timeout} s") from None
    if not line.endswith(b"\n"):
        raise AssertionError(f"the child closed its output before a complete line: {line!r}")
    return line.decode().rstrip("\r\n")
