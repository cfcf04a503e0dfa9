"""Nothing outlives the runner, even when the runner and its worker are SIGKILLed together.

The tree is :mod:`harness.process.tree_probe`'s: a runner's job, a worker's
job, a real ``peerwire app``, an MCP server and a Codex stand-in with a
descendant of its own that never ends by itself. Nobody gets to tear down;
whatever is still alive after the bound is an orphan.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.process.tree_probe import kill_runner_and_count

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups; Windows has Job Objects")


def test_sigkill_of_the_runners_process_group_and_its_worker_leaves_no_orphan(tmp_path: Path) -> None:
    counted = kill_runner_and_count(tmp_path)
    assert counted["processes"] == 4
    assert counted["orphans"] == [], counted
