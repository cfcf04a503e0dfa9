"""A short command run to its end or to its bound, and then nothing of it left: ``subprocess.run`` for a tree.

``subprocess.run(timeout=...)`` kills the child it started and nothing else: a
``codex --version`` that hangs after starting a helper leaves the helper
running (holding our pipes, until whoever reads them gives up). Here the child
leads a process group of its own, and when the bound passes, the whole group
is killed, together with any descendant that left the group (found through
the process tree before the kill, while the links still hold). The child's
group is also ended after a normal exit: a one-shot command has no business
leaving anything behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

import psutil

_DRAIN_S = 1.0
"""How long the output of a killed tree may take to reach us once its last writer is gone."""


def run_bounded(argv: Sequence[str], *, timeout: float, input: str | bytes | None = None,
                **options: Any) -> subprocess.CompletedProcess:
    """Like ``subprocess.run(argv, timeout=timeout, **options)`` (output captured where asked), but on POSIX the
    child's whole process tree ends with it.

    Raises ``subprocess.TimeoutExpired`` once ``timeout`` seconds pass, after
    everything the command started is gone; ``OSError`` when it cannot start.
    """
    if options.pop("capture_output", False):
        options.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        options["stdin"] = subprocess.PIPE
    posix = os.name == "posix"
    deadline = time.monotonic() + timeout
    with subprocess.Popen(list(argv), start_new_session=posix, **options) as process:
        # The output is read beside the wait, not instead of it: a child that exits while something it
        # started still holds our pipes is done, and what holds them goes with its group.
        output: list[Any] = [None, None]

        def collect() -> None:
            output[:] = process.communicate(input)

        reader = threading.Thread(target=collect, name=f"output of {argv[0]}", daemon=True)
        reader.start()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            _end_tree(process, posix)
            reader.join(max(0.0, deadline - time.monotonic()) + _DRAIN_S)
            raise subprocess.TimeoutExpired(process.args, timeout, *output) from None
        finally:
            _end_group(process, posix)
        reader.join(max(0.0, deadline - time.monotonic()))
        if reader.is_alive():  # a descendant that left the group still holds the pipes
            raise subprocess.TimeoutExpired(process.args, timeout, *output)
    return subprocess.CompletedProcess(process.args, process.returncode, *output)


def _end_tree(process: subprocess.Popen, posix: bool) -> None:
    try:
        strays = psutil.Process(process.pid).children(recursive=True)  # before the kill breaks the links
    except psutil.Error:
        strays = []
    if posix:
        _end_group(process, posix)
    else:
        process.kill()
    for stray in strays:
        try:
            stray.kill()
        except psutil.Error:
            pass  # gone with the group already
    process.wait()


def _end_group(process: subprocess.Popen, posix: bool) -> None:
    if not posix:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the child leads its group: its pid is the group's id
    except (ProcessLookupError, PermissionError):
        pass  # nobody is left in it
