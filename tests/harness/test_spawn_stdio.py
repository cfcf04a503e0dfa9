"""A driver's stdio children run inside the run's job: spawn gives stdin a pipe when asked."""

from __future__ import annotations

import sys

from harness.process.jobs import Job, spawn_through
from tests.patience import WAIT_S

ECHO = [sys.executable, "-c", "import sys; [print(line.strip().upper(), flush=True) for line in sys.stdin]"]


def test_a_stdio_child_spoken_to_line_by_line_belongs_to_the_job(tmp_path):
    with Job("stdio") as job:
        spawn = spawn_through(job, "echo")
        with open(tmp_path / "stderr", "wb") as stderr:
            child = spawn(ECHO, {}, stderr, stdin_pipe=True)
            child.stdin.write(b"turn/start\n")
            child.stdin.flush()
            assert child.stdout.readline() == b"TURN/START\n"
            quiet = spawn(ECHO, {}, stderr)  # the default: the null device, which ends at once
            assert quiet.stdout.read() == b"" and quiet.wait(WAIT_S) == 0
        assert [p.popen for p in job.processes] == [child, quiet]
    assert job.teardown.clean and child.poll() is not None
    child.stdin.close()
    child.stdout.close()
    quiet.stdout.close()
