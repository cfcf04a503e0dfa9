"""Own a child through a lifeline, then wait to be killed.

    lifeline_owner.py

Starts a child that watches its lifeline (and otherwise blocks forever), prints
the child's pid, and blocks on stdin. Killing this process must end the child.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the project root, for `harness`

from harness.process.lifeline import Lifeline  # noqa: E402

CHILD = """
import sys, threading
sys.path.insert(0, {root!r})
from harness.process import lifeline
assert lifeline.watch()
print("watching", flush=True)
threading.Event().wait()
"""


def main() -> None:
    line = Lifeline()
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(root=str(Path(__file__).resolve().parents[3]))],
                             env={**__import__("os").environ, **line.env()}, pass_fds=(line.fd,),
                             stdout=subprocess.PIPE, start_new_session=True)
    line.handed_over()
    assert child.stdout is not None
    assert child.stdout.readline() == b"watching\n"
    print(child.pid, flush=True)
    sys.stdin.readline()


if __name__ == "__main__":
    main()
