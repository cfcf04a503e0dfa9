"""A runner-shaped process tree to kill, and a count of what outlives it.

    python -m harness.process.tree_probe runner --home H --pids-file F
    python -m harness.process.tree_probe worker --home H
    python -m harness.process.tree_probe idle [--spawn-child]
    python -m harness.process.tree_probe count --dir D

The tree has the acceptance run's shape, with the parts that need no Codex:
a runner owning a :class:`~harness.process.jobs.Job` starts a worker through
it; the worker owns a job of its own and starts through it a real ``peerwire
app`` on ``H``, a ``peerwire mcp serve`` for it, and a stand-in for a Codex
app-server (``idle --spawn-child``: a process with a descendant in its group
that never exits on its own, not even at end of input). Once every pid is
known the runner writes them to ``F`` as JSON, prints ``ready`` and waits.

:func:`kill_runner_and_count` starts that tree, SIGKILLs the runner's whole
process group together with the worker (nothing gets to tear down), and
counts the processes of the tree still alive after a bound: the orphans.
The fault campaign (``python -m peerwire_lab.faults``) and the process tests use it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from harness.resources import packages_root

READY_S = 30.0
"""How long the tree may take to start (interpreters, the app's store) on a loaded machine."""
ORPHAN_BOUND_S = 20.0
"""How long after the kill a process of the tree may take to end before it counts as an orphan."""


def _ready_line(stream, what: str) -> list[str]:
    line = stream.readline().decode().split()
    if not line or line[0] != "ready":
        raise SystemExit(f"{what} did not start: {line!r}")
    return line[1:]


def idle(args: argparse.Namespace) -> None:
    pids = [os.getpid()]
    if args.spawn_child:
        # In a session of its own, as Codex starts its MCP servers (through a login shell): out of its parent's
        # process group, so a kill of that group does not reach it.
        child = subprocess.Popen([sys.executable, "-m", "harness.process.tree_probe", "idle"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
        assert child.stdout is not None
        pids += [int(pid) for pid in _ready_line(child.stdout, "the idle child")]
        child.stdout.close()
    print("ready", *pids, flush=True)
    threading.Event().wait()  # only a signal ends it


def worker(args: argparse.Namespace) -> None:
    from harness.process import lifeline
    from harness.process.jobs import Job, install_signal_handlers

    lifeline.watch()
    job = Job("probe worker", grace=2.0, adopt_orphans=True)
    install_signal_handlers(job)
    with job:
        app = job.spawn([sys.executable, "-m", "peerwire", "app", "--home", args.home], name="peerwire-app",
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert app.popen.stdout is not None
        ready = json.loads(app.popen.stdout.readline() or b"{}")
        app.popen.stdout.close()
        if ready.get("event") != "ready":
            raise SystemExit(f"peerwire app did not start: {ready!r}")
        codex = job.spawn([sys.executable, "-m", "harness.process.tree_probe", "idle", "--spawn-child"],
                          name="codex stand-in", stdout=subprocess.PIPE)
        assert codex.popen.stdout is not None
        stand_in, its_child = (int(pid) for pid in _ready_line(codex.popen.stdout, "the stand-in"))
        codex.popen.stdout.close()
        mcp = job.spawn([sys.executable, "-m", "peerwire", "mcp", "serve"], name="mcp serve",
                        env={**os.environ, "PEERWIRE_HOME": args.home}, stdin=subprocess.PIPE)
        print("ready", os.getpid(), app.pid, stand_in, its_child, mcp.pid, flush=True)
        threading.Event().wait()


def runner(args: argparse.Namespace) -> None:
    from harness.process.jobs import Job, install_signal_handlers

    job = Job("probe runner", grace=2.0, adopt_orphans=True)
    install_signal_handlers(job)
    with job:
        spawned = job.spawn([sys.executable, "-m", "harness.process.tree_probe", "worker", "--home", args.home],
                            name="worker", stdout=subprocess.PIPE)
        assert spawned.popen.stdout is not None
        names = ("worker", "peerwire app", "codex stand-in", "its child", "mcp serve")
        pids = dict(zip(names, (int(p) for p in _ready_line(spawned.popen.stdout, "the worker"))))
        spawned.popen.stdout.close()
        Path(args.pids_file).write_text(json.dumps({"runner": os.getpid(), **pids}))
        print("ready", flush=True)
        sys.stdin.readline()


def kill_runner_and_count(workdir: Path, bound_s: float = ORPHAN_BOUND_S) -> dict:
    """Start the tree in ``workdir``, SIGKILL the runner's process group and the worker, count the orphans.

    Returns ``{"processes": N, "orphans": [names], "last_ended_s": s}``: ``processes``
    in the tree besides the two killed, ``orphans`` those alive ``bound_s``
    after the kill (each then killed here, so nothing is left behind),
    ``last_ended_s`` how long the last of the others took to end.
    """
    pids_file = workdir / "tree.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(packages_root()),
                                                                     os.environ.get("PYTHONPATH")]))}
    runner_process = subprocess.Popen([sys.executable, "-m", "harness.process.tree_probe", "runner", "--home",
                                       str(workdir / "home"), "--pids-file", str(pids_file)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      env=env, start_new_session=True)
    try:
        assert runner_process.stdout is not None
        deadline = time.monotonic() + READY_S
        import select

        if not select.select([runner_process.stdout], [], [], READY_S)[0]:
            raise RuntimeError("the process tree did not start in time")
        _ready_line(runner_process.stdout, "the runner")
        pids = json.loads(pids_file.read_text())
        tree = {name: psutil.Process(pid) for name, pid in pids.items()}
        os.killpg(runner_process.pid, signal.SIGKILL)
        os.kill(pids["worker"], signal.SIGKILL)
        killed_at = time.monotonic()
        runner_process.wait(max(1.0, deadline - time.monotonic()))
        others = {name: proc for name, proc in tree.items() if name not in ("runner", "worker")}
        _, alive = psutil.wait_procs(list(others.values()), timeout=bound_s)
        seconds = time.monotonic() - killed_at
        orphans = [name for name, proc in others.items() if proc in alive]
        for proc in alive:
            try:
                proc.kill()
            except psutil.Error:
                pass
        return {"processes": len(others), "orphans": orphans, "last_ended_s": round(seconds, 2)}
    finally:
        if runner_process.poll() is None:
            runner_process.kill()
            runner_process.wait()
        for pipe in (runner_process.stdin, runner_process.stdout):
            if pipe is not None:
                pipe.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.process.tree_probe")
    roles = parser.add_subparsers(dest="role", required=True)
    run = roles.add_parser("runner")
    run.add_argument("--home", required=True)
    run.add_argument("--pids-file", required=True)
    work = roles.add_parser("worker")
    work.add_argument("--home", required=True)
    wait = roles.add_parser("idle")
    wait.add_argument("--spawn-child", action="store_true")
    count = roles.add_parser("count", help="start the tree, kill its runner and worker, print the count as JSON")
    count.add_argument("--dir", required=True, type=Path, help="a directory of its own for the tree's home")
    args = parser.parse_args(argv)
    if args.role == "count":
        args.dir.mkdir(parents=True, exist_ok=True)
        print(json.dumps(kill_runner_and_count(args.dir)))
        return 0
    {"runner": runner, "worker": worker, "idle": idle}[args.role](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
