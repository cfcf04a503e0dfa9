"""Hold a run home's lock until told to let go.

    hold_run_home.py ROOT RUN_ID

Opens the run home, prints "ready", then waits for a line (or end of input)
on stdin and closes it, keeping the directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the project root, for `harness`

from harness.process.run_home import RunHome  # noqa: E402


def main() -> None:
    root, run_id = sys.argv[1:3]
    with RunHome(root, run_id=run_id, keep=True):
        print("ready", flush=True)
        sys.stdin.readline()


if __name__ == "__main__":
    main()
