"""A lifeline: the child learns of its owner's death, SIGKILL included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness.process.lifeline import ENV, Lifeline, watch

from .child_output import read_line
from tests.patience import WAIT_S

OWNER = Path(__file__).parent / "programs" / "lifeline_owner.py"
TIMEOUT_S = WAIT_S

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes and signals")


def test_sigkill_of_the_owner_sends_the_child_sigterm() -> None:
    owner = subprocess.Popen([sys.executable, str(OWNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        child = psutil.Process(int(read_line(owner.stdout, TIMEOUT_S)))  # type: ignore[arg-type]
        assert child.is_running()
        owner.kill()
        owner.wait(timeout=TIMEOUT_S)
        # The child was reparented away from the dead owner; its own end of file ended it.
        _, alive = psutil.wait_procs([child], timeout=TIMEOUT_S)
        assert alive == []
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        owner.stdin.close()  # type: ignore[union-attr]
        owner.stdout.close()  # type: ignore[union-attr]


def test_a_child_started_by_hand_has_no_lifeline() -> None:
    assert watch({}) is False


def test_cut_closes_what_the_owner_holds_and_is_idempotent() -> None:
    line = Lifeline()
    read_end = line.fd
    assert line.env() == {ENV: str(read_end)}
    line.cut()
    line.cut()
    assert line.fd == -1
    with pytest.raises(OSError):
        os.fstat(read_end)
