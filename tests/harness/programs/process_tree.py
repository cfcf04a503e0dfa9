"""A runner, its worker and their descendants, for the process job tests.

    process_tree.py runner --pids-file F --teardown-file F [--adopt-orphans] [--worker-exits-early]
    process_tree.py worker [--exit-on-eof]
    process_tree.py idle [--spawn-child] [--on-term die|ignore|report]

runner: creates a Job, installs its signal handlers and spawns a worker. The
worker starts a grandchild in its own process group and a second one that
escapes into its own session (setsid) and starts a great-grandchild there.
Once every pid is known the runner writes them to --pids-file as JSON, prints
"ready" and reads one command line from stdin: "exit" returns normally,
"raise" raises mid-run; SIGINT / SIGTERM may arrive instead. Whichever way it
ends, it writes the job's teardown to --teardown-file.

idle: prints "ready <pid> [<child pid>]" and then blocks forever. It never
exits on its own, in particular not when its parent or its pipes go away: only
a signal can end it. --on-term ignore makes SIGTERM harmless; --on-term report
also prints "term" each time one arrives.

The worker and idle roles also run on Windows, where setsid has no equivalent
and start_new_session is ignored.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType

HERE = Path(__file__).resolve()
# Children stay referenced: a collected Popen of a running child would warn.
_children: list[subprocess.Popen[bytes]] = []


def _start(argv: list[str], **options: object) -> tuple[subprocess.Popen[bytes], list[int]]:
    """Start one of this program's roles and wait for its "ready" line."""
    child = subprocess.Popen(
        [sys.executable, str(HERE), *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, **options
    )
    assert child.stdout is not None
    line = child.stdout.readline().decode().split()
    child.stdout.close()
    _children.append(child)
    if not line or line[0] != "ready":
        raise SystemExit(f"{argv[0]} did not start: {line!r}")
    return child, [int(pid) for pid in line[1:]]


def _block_forever() -> None:
    # An Event nobody sets: the wait ends only with the process. Signal
    # handlers still run meanwhile (POSIX lock waits are interruptible).
    threading.Event().wait()


def _report_term(signum: int, frame: FrameType | None) -> None:
    print("term", flush=True)


def idle(args: argparse.Namespace) -> None:
    if args.on_term == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif args.on_term == "report":
        signal.signal(signal.SIGTERM, _report_term)
    pids = [os.getpid()]
    if args.spawn_child:
        _, child_pids = _start(["idle"])
        pids += child_pids
    print("ready", *pids, flush=True)
    _block_forever()


def worker(args: argparse.Namespace) -> None:
    _, grandchild = _start(["idle"])
    # start_new_session runs setsid() in the child: it leaves the worker's
    # process group, so a kill of that group does not reach it.
    _, escaped = _start(["idle", "--spawn-child"], start_new_session=True)
    print("ready", os.getpid(), *grandchild, *escaped, flush=True)
    if args.exit_on_eof:
        sys.stdin.read()
        return  # Leaves the grandchildren behind as orphans.
    _block_forever()


def runner(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE.parents[3]))  # the project root, for `harness`
    from harness.process.jobs import Job, install_signal_handlers

    job = Job("runner", grace=2.0, adopt_orphans=args.adopt_orphans)
    install_signal_handlers(job)
    try:
        with job:
            worker_argv = [sys.executable, str(HERE), "worker"]
            if args.worker_exits_early:
                worker_argv.append("--exit-on-eof")
            worker = job.spawn(worker_argv, name="worker", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert worker.popen.stdout is not None and worker.popen.stdin is not None
            line = worker.popen.stdout.readline().decode().split()
            worker.popen.stdout.close()
            if not line or line[0] != "ready":
                raise SystemExit(f"worker did not start: {line!r}")
            worker_pid, grandchild, escaped, escaped_child = (int(pid) for pid in line[1:])
            worker.popen.stdin.close()
            if args.worker_exits_early:
                worker.popen.wait()
            pids = {
                "runner": os.getpid(),
                "worker": worker_pid,
                "grandchild": grandchild,
                "escaped": escaped,
                "escaped_child": escaped_child,
            }
            _write_json(Path(args.pids_file), pids)
            print("ready", flush=True)
            command = sys.stdin.readline().strip()
            if command == "raise":
                raise RuntimeError("scenario failed mid-run")
    finally:
        if job.teardown is not None:
            _write_json(Path(args.teardown_file), {"adopts_orphans": job.adopts_orphans,
                                                    **dataclasses.asdict(job.teardown)})


def _write_json(path: Path, value: object) -> None:
    # Written whole, then renamed: a reader never sees half a file.
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(value))
    partial.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser()
    roles = parser.add_subparsers(dest="role", required=True)
    run = roles.add_parser("runner")
    run.add_argument("--pids-file", required=True)
    run.add_argument("--teardown-file", required=True)
    run.add_argument("--adopt-orphans", action="store_true")
    run.add_argument("--worker-exits-early", action="store_true")
    work = roles.add_parser("worker")
    work.add_argument("--exit-on-eof", action="store_true")
    wait = roles.add_parser("idle")
    wait.add_argument("--spawn-child", action="store_true")
    wait.add_argument("--on-term", choices=["die", "ignore", "report"], default="die")
    args = parser.parse_args()
    {"runner": runner, "worker": worker, "idle": idle}[args.role](args)


if __name__ == "__main__":
    main()
