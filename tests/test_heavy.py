"""Heavy tests take one of two slots shared by every process of a session: a third waits for a slot and takes it
the moment its holder ends (real processes holding real locks)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests import heavy
from tests.patience import GLANCE_S, WAIT_S

HOLDER = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from tests import heavy
with heavy.slot(Path(sys.argv[1])) as held:
    print(held, flush=True)
    sys.stdin.read()  # hold the slot until the test closes our stdin
"""

pytestmark = pytest.mark.skipif(heavy.fcntl is None, reason="POSIX flock")


def hold(folder: Path) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), str(Path(__file__).parents[1])],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()  # type: ignore[union-attr]
    assert line.strip().isdigit(), line
    return process, int(line)


def test_a_third_heavy_test_waits_for_a_slot_and_takes_it_when_a_holder_ends(tmp_path: Path) -> None:
    first, first_slot = hold(tmp_path)
    second, second_slot = hold(tmp_path)
    assert {first_slot, second_slot} == set(range(heavy.AT_ONCE))
    holders = {first_slot: first, second_slot: second}
    took = threading.Event()

    def third() -> None:
        with heavy.slot(tmp_path, worker=0):
            took.set()

    waiting = threading.Thread(target=third)
    waiting.start()
    try:
        assert not took.wait(GLANCE_S), "a third heavy test ran beside two"
        holders[0].stdin.close()  # type: ignore[union-attr]
        assert holders[0].wait(timeout=WAIT_S) == 0
        assert took.wait(WAIT_S), "the slot a holder released was not taken"
    finally:
        for process in holders.values():
            if process.stdin and not process.stdin.closed:
                process.stdin.close()
            process.wait(timeout=WAIT_S)
            process.stdout.close()  # type: ignore[union-attr]
        waiting.join(WAIT_S)


def test_a_session_in_one_process_needs_no_slot() -> None:
    with heavy.slot(None) as held:
        assert held is None
