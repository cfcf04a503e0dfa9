"""A fault campaign against the reference core: ``python -m peerwire_lab.faults``.

Each round starts the app on one home that lives through the whole campaign,
puts it under load -- concurrent senders assigning tasks, one recipient
receiving them -- and kills it with SIGKILL at a random moment. Meanwhile the
clients misbehave the way real ones do:

* a sender drops the answer to a call (sends it, hangs up) and retries it with
  the same call id, as an MCP client does after a timeout;
* the recipient drops the answer to a receive, abandons a long poll midway, or
  does not acknowledge what it read.

After every kill the store is checked while no app holds it (``PRAGMA
integrity_check``) and every receipt a sender holds must name a record that is
there. At the end the recipient drains its mailbox and the campaign counts:

``receipts``             calls that returned a receipt;
``losses``               receipts whose record is not in the store;
``duplicate_records``    records admitted twice for one call (a retry that was not idempotent);
``duplicate_exposures``  tasks offered as new work under two claims, or again after the
                         recipient acknowledged past them;
``lost_exposures``       tasks in the recipient's mailbox never offered to it as new work;
``integrity``            how many checks found the store whole, and how many did not.

With ``--disk-full N`` a second app's disk is filled N times (a small tmpfs
where the machine lets it mount one, else RLIMIT_FSIZE on the app): every
refusal must be the retriable ``storage_unavailable``, the app must stay up,
every refused call must go through when retried with its id once space is
back, each exactly once, and the store must stay whole.

With ``--local`` (all of them by default) it also puts the faults of the local
surface on an app (:mod:`peerwire_lab.surface_faults`): a hung app, a held lock,
a flood of unread requests, planted links and foreign files, a damaged
write-ahead log, a runner and its worker SIGKILLed together.

Bounded by ``--rounds`` and ``--seconds``, whichever ends first. Exit status 0
when every count that must be zero is zero.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import select
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from peerwire.control import encode
from peerwire.home import Home

from . import surface_faults
from .surface_faults import drain

CALL_TIMEOUT_S = 30.0


@dataclass
class Tally:
    """What the campaign saw; the fields that must stay zero are checked by :meth:`clean`."""

    rounds: int = 0
    seconds: float = 0.0
    crashes: int = 0
    receipts: int = 0
    losses: int = 0
    duplicate_records: int = 0
    tasks: int = 0
    exposed: int = 0
    duplicate_exposures: int = 0
    lost_exposures: int = 0
    dropped_answers: int = 0
    abandoned_polls: int = 0
    retries: int = 0
    integrity_ok: int = 0
    integrity_failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    disk_full: dict[str, Any] = field(default_factory=dict)
    local: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The local surface's checks (:mod:`peerwire_lab.surface_faults`), each with its ``failures``."""

    def clean(self) -> bool:
        return not (self.losses or self.duplicate_records or self.duplicate_exposures or self.lost_exposures
                    or self.integrity_failed or self.disk_full.get("failures")
                    or any(check.get("failures") for check in self.local.values()))


class Gone(Exception):
    """The app did not answer: it is down, or died during the call."""


def control_call(home: Home, request: dict[str, Any], *, wait_s: float = 0.0, hang_up_after: float | None = None,
                 ) -> dict[str, Any] | None:
    """One control call. ``hang_up_after``: close that many seconds after sending, without the answer."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with home.socket_address() as address:
            sock.connect(address)
        sock.sendall(encode(request))
        if hang_up_after is not None:
            if hang_up_after > 0:
                sock.settimeout(hang_up_after)
                with contextlib.suppress(OSError):
                    sock.recv(1)  # a peek at most; the answer is abandoned either way
            return None
        sock.settimeout(wait_s + CALL_TIMEOUT_S)
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise Gone("the app closed the connection")
            data += chunk
        return json.loads(data)
    except OSError as exc:
        raise Gone(str(exc)) from None
    finally:
        sock.close()


def start_app(home: Home, *args: str) -> subprocess.Popen[bytes]:
    """``peerwire app ARGS`` on ``home``, once it printed its ready line (its stderr goes to a log beside the home)."""
    log = open(home.path.parent / "app-stderr.log", "ab")
    with log:
        app = subprocess.Popen([sys.executable, "-m", "peerwire", "app", "--home", str(home.path), *args],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    assert app.stdout is not None
    ready, _, _ = select.select([app.stdout], [], [], CALL_TIMEOUT_S)
    line = app.stdout.readline() if ready else b""
    app.stdout.close()
    if not line.startswith(b'{"event": "ready"'):
        app.kill()
        app.wait()
        raise RuntimeError(f"peerwire app did not start (see {home.path.parent / 'app-stderr.log'}): {line[:200]!r}")
    return app


class SmallDisk:
    """A small filesystem to fill: a tmpfs mounted for the purpose, where the machine allows it.

    16 MiB by default: room for a store whose write-ahead log reaches SQLite's
    checkpoint size (1000 pages, 4 MiB) once space is given back.

    ``fill()`` takes every free byte with a filler file; ``free()`` gives them
    back. Without permission to mount (not root, a container without
    CAP_SYS_ADMIN), :meth:`mount` raises ``PermissionError``; callers then fall
    back to :class:`FileSizeLimit`.
    """

    method = "tmpfs"

    def __init__(self, path: Path, size_kib: int = 16384):
        self.path = path
        self.size_kib = size_kib
        self.filler = path / "filler"
        self.mounted = False

    def mount(self) -> "SmallDisk":
        self.path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_kib}k,mode=0700", "tmpfs",
                               str(self.path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise PermissionError(f"cannot mount a tmpfs at {self.path}: {done.stderr.strip() or done.returncode}")
        self.mounted = True
        return self

    def fill(self, app_pid: int) -> None:
        chunk = b"\1" * 65536
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while len(chunk) >= 512:
                try:
                    os.write(fd, chunk)
                except OSError:
                    chunk = chunk[: len(chunk) // 2]  # the last free blocks, in smaller bites
        finally:
            os.close(fd)

    def free(self, app_pid: int) -> None:
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            self.mounted = False

    def describe(self) -> str:
        return f"a {self.size_kib} KiB tmpfs filled to the last block"


class FileSizeLimit:
    """Where nothing can be mounted: RLIMIT_FSIZE on the app, so its files cannot grow (EFBIG)."""

    method = "rlimit"

    def __init__(self, path: Path):
        self.path = path

    def mount(self) -> "FileSizeLimit":
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    def fill(self, app_pid: int) -> None:
        import psutil

        largest = max((p.stat().st_size for p in self.path.rglob("peerwire.db*") if p.is_file()), default=0)
        app = psutil.Process(app_pid)
        # Only the soft limit: anyone may raise it again up to the hard one, which stays as it was.
        app.rlimit(psutil.RLIMIT_FSIZE, (largest, app.rlimit(psutil.RLIMIT_FSIZE)[1]))

    def free(self, app_pid: int) -> None:
        import psutil

        app = psutil.Process(app_pid)
        hard = app.rlimit(psutil.RLIMIT_FSIZE)[1]
        app.rlimit(psutil.RLIMIT_FSIZE, (hard, hard))

    def unmount(self) -> None:
        pass

    def describe(self) -> str:
        return "RLIMIT_FSIZE on the app at the store's current size (no permission to mount a tmpfs)"


def small_disk(path: Path) -> SmallDisk | FileSizeLimit:
    """The best full disk this machine allows at ``path``, ready to fill."""
    try:
        return SmallDisk(path).mount()
    except (PermissionError, FileNotFoundError):
        return FileSizeLimit(path).mount()


class Campaign:
    def __init__(self, root: Path, *, senders: int, seed: int):
        self.home = Home(root / "home")
        self.random = random.Random(seed)
        self.senders = senders
        self.tally = Tally()
        self.app_up = threading.Event()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.receipts: dict[str, str] = {}  # call id -> interaction id
        self.exposures: dict[str, set[str]] = {}  # request id -> claim ids it was offered under
        self.seq_of: dict[str, int] = {}
        self.acked_upto = 0
        self._ids = itertools.count(1)
        self.tokens: dict[str, str] = {}
        self.app: Any = None

    # -- the app ---------------------------------------------------------------------------

    def start_app(self) -> None:
        self.app = start_app(self.home)
        self.app_up.set()

    def kill_app(self) -> None:
        self.app_up.clear()
        self.app.kill()
        self.app.wait()
        self.tally.crashes += 1

    def stop_app(self) -> None:
        self.app_up.clear()
        self.app.terminate()
        self.app.wait(timeout=CALL_TIMEOUT_S)

    def register(self) -> None:
        for name in ["inbox", *(f"sender{i}" for i in range(self.senders))]:
            answer = self.op("register_agent", {"name": name}, token=None)
            self.tokens[name] = answer["session_token"]

    def op(self, op: str, args: dict[str, Any], *, token: str | None, meta: dict[str, Any] | None = None,
           wait_s: float = 0.0, hang_up_after: float | None = None) -> dict[str, Any] | None:
        request: dict[str, Any] = {"id": next(self._ids), "op": op, "args": args, "meta": meta or {}}
        if token:
            request["token"] = token
        else:  # an operator operation
            request["operator"] = self.home.operator_credential()
        answer = control_call(self.home, request, wait_s=wait_s, hang_up_after=hang_up_after)
        if answer is None:
            return None
        if not answer.get("ok"):
            code = answer.get("error", {}).get("code", "?")
            with self.lock:
                self.tally.errors[code] = self.tally.errors.get(code, 0) + 1
            if code == "app_unavailable":
                raise Gone(code)
            raise RuntimeError(f"{op} failed: {answer.get('error')}")
        return answer["result"]

    # -- the clients ------------------------------------------------------------------------

    def sender(self, index: int) -> None:
        token = self.tokens[f"sender{index}"]
        for number in itertools.count(1):
            if self.stop.is_set():
                return
            call_id = f"fault-{index}-{number}"
            args = {"target": "inbox", "message": f"task {call_id}"}
            meta = {"via": "faults", "call_id": call_id}
            first = True
            while not self.stop.is_set():
                if not self.app_up.wait(1.0):
                    continue
                try:
                    if first and self.random.random() < 0.1:
                        with self.lock:
                            self.tally.dropped_answers += 1
                        self.op("followup_task", args, token=token, meta=meta, hang_up_after=0)
                        raise Gone("answer dropped on purpose")
                    receipt = self.op("followup_task", args, token=token, meta=meta)
                except Gone:
                    first = False
                    with self.lock:
                        self.tally.retries += 1
                    continue
                assert receipt is not None
                with self.lock:
                    self.receipts[call_id] = receipt["interaction_id"]
                break

    def receiver(self, *, drain: bool = False) -> None:
        token = self.tokens["inbox"]
        pending_ack: tuple[str, int] | None = None
        while not self.stop.is_set() or drain:
            if not self.app_up.wait(1.0):
                continue
            args: dict[str, Any] = {"limit": self.random.randint(1, 20)}
            if pending_ack is not None:
                args["ack_cursor"] = pending_ack[0]
            roll = 1.0 if drain else self.random.random()
            try:
                if roll < 0.08:
                    with self.lock:
                        self.tally.dropped_answers += 1
                    self.op("receive_messages", args, token=token, hang_up_after=0)
                    continue
                if roll < 0.12:
                    args["timeout_ms"] = 5000
                    with self.lock:
                        self.tally.abandoned_polls += 1
                    self.op("receive_messages", args, token=token, wait_s=5.0,
                            hang_up_after=self.random.uniform(0.0, 0.3))
                    continue
                args["timeout_ms"] = 0 if drain else self.random.choice([0, 0, 50, 300])
                page = self.op("receive_messages", args, token=token, wait_s=args["timeout_ms"] / 1000)
            except Gone:
                continue
            assert page is not None
            if pending_ack is not None:
                self.acked_upto = max(self.acked_upto, pending_ack[1])  # confirmed by this answer
                pending_ack = None
            self.exposed(page)
            if page["records"] and (drain or self.random.random() < 0.7):
                pending_ack = (page["cursor"], page["records"][-1]["seq"])
            elif drain and not page["records"]:
                return

    def exposed(self, page: dict[str, Any]) -> None:
        seqs = {r["request_id"]: r["seq"] for r in page["records"] if r.get("request_id")}
        with self.lock:
            for claim in page["claims"]:
                request_id = claim["request_id"]
                seen = self.exposures.setdefault(request_id, set())
                # Listed again under its one claim is how a lost answer is made good; under another
                # claim, or after the recipient acknowledged past it, it is a second exposure.
                if seqs.get(request_id, 0) <= self.acked_upto or (seen and claim["claim_id"] not in seen):
                    self.tally.duplicate_exposures += 1
                seen.add(claim["claim_id"])

    # -- the checks ---------------------------------------------------------------------------

    def check_store(self) -> None:
        """While no app holds the store: is it whole, and is every receipt's record in it?"""
        with contextlib.closing(sqlite3.connect(f"{self.home.db.as_uri()}?mode=ro", uri=True)) as db:
            whole = db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            present = {row[0] for row in db.execute("SELECT interaction_id FROM interactions")}
        with self.lock:
            if whole:
                self.tally.integrity_ok += 1
            else:
                self.tally.integrity_failed += 1
            self.tally.losses = sum(1 for ix in self.receipts.values() if ix not in present)

    def final_counts(self) -> None:
        from peerwire.export import of_home

        document = of_home(self.home)
        inbox = next(a["agent_id"] for a in document["agents"] if a["name"] == "inbox")
        tasks = [r for r in document["records"] if r["kind"] == "task" and r["recipient"]["agent_id"] == inbox]
        calls: dict[str, int] = {}
        for record in tasks:
            call_id = (record.get("tool_receipt") or {}).get("call_id")
            if call_id:
                calls[call_id] = calls.get(call_id, 0) + 1
        present = {r["record_id"] for r in document["records"]}
        self.tally.tasks = len(tasks)
        self.tally.receipts = len(self.receipts)
        self.tally.losses = sum(1 for ix in self.receipts.values() if ix not in present)
        self.tally.duplicate_records = sum(n - 1 for n in calls.values() if n > 1)
        self.tally.exposed = sum(1 for r in tasks if self.exposures.get(r["request_id"]))
        self.tally.lost_exposures = len(tasks) - self.tally.exposed

    # -- the campaign -------------------------------------------------------------------------

    def run(self, rounds: int, seconds: float, progress: bool) -> Tally:
        began = time.monotonic()
        self.home.prepare()
        self.start_app()
        self.register()
        clients = [threading.Thread(target=self.sender, args=(i,), daemon=True) for i in range(self.senders)]
        clients.append(threading.Thread(target=self.receiver, daemon=True))
        for client in clients:
            client.start()
        for number in range(1, rounds + 1):
            if not self.app_up.is_set():
                self.start_app()
            # The fault itself: SIGKILL at a random moment of the load.
            self.stop.wait(self.random.uniform(0.05, 0.6))
            self.kill_app()
            self.check_store()
            self.tally.rounds = number
            if progress and (number % 25 == 0 or number == rounds):
                print(f"faults: round {number}: {len(self.receipts)} receipts, {self.tally.losses} lost, "
                      f"{self.tally.duplicate_exposures} duplicate exposures", file=sys.stderr)
            if time.monotonic() - began > seconds:
                break
        self.stop.set()
        for client in clients:
            client.join(timeout=CALL_TIMEOUT_S)
        self.start_app()
        try:
            self.receiver(drain=True)
        finally:
            self.stop_app()
        self.check_store()
        self.final_counts()
        self.tally.seconds = round(time.monotonic() - began, 1)
        return self.tally


def disk_full(root: Path, cycles: int, sends: int = 60) -> dict[str, Any]:
    """Send to an app whose disk is full, ``cycles`` times; every refusal must be ``storage_unavailable``.

    Each cycle fills the disk, sends ``sends`` tasks (each with its call id),
    checks the app still answers, frees the disk and retries every refused
    call with its id. At the end each call must be admitted exactly once and
    the store whole.
    """
    from peerwire.control import ControlClient
    from peerwire.errors import Code, PeerwireError

    disk = small_disk(root / "disk")
    home = Home(disk.path / "home")
    out: dict[str, Any] = {"method": disk.describe(), "cycles": cycles, "sends": 0, "receipts": 0,
                           "storage_unavailable": 0, "other_errors": {}, "failures": 0}
    app = None
    try:
        home.prepare()
        app = start_app(home)
        admin = ControlClient(home)
        tokens = {name: admin.call("register_agent", {"name": name})["session_token"] for name in ("writer", "inbox")}
        writer = ControlClient(home, tokens["writer"])
        admitted: dict[str, str] = {}
        for cycle in range(cycles):
            disk.fill(app.pid)
            refused = []
            for n in range(sends):
                call_id = f"full-{cycle}-{n}"
                out["sends"] += 1
                try:
                    admitted[call_id] = writer.call("followup_task", {"target": "inbox", "message": call_id},
                                                    meta={"call_id": call_id})["request_id"]
                except PeerwireError as error:
                    if error.code is Code.STORAGE_UNAVAILABLE and error.details.get("retriable") is True:
                        out["storage_unavailable"] += 1
                        refused.append(call_id)
                    else:
                        out["other_errors"][error.code.value] = out["other_errors"].get(error.code.value, 0) + 1
                        out["failures"] += 1
            if not admin.call("status").get("ok"):
                out["failures"] += 1
            disk.free(app.pid)
            for call_id in refused:
                admitted[call_id] = writer.call("followup_task", {"target": "inbox", "message": call_id},
                                                meta={"call_id": call_id})["request_id"]
        seen = [record["request_id"] for record in drain(ControlClient(home, tokens["inbox"]))]
        out["receipts"] = len(admitted)
        out["losses"] = len(set(admitted.values()) - set(seen))
        out["duplicates"] = len(seen) - len(set(seen))
        out["failures"] += out["losses"] + out["duplicates"]
    finally:
        if app is not None:
            app.terminate()
            app.wait(timeout=CALL_TIMEOUT_S)
        try:
            with contextlib.closing(sqlite3.connect(f"{home.db.as_uri()}?mode=ro", uri=True)) as db:
                out["integrity"] = db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        except sqlite3.Error:
            out["integrity"] = False
        if not out["integrity"]:
            out["failures"] += 1
        disk.unmount()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m peerwire_lab.faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="SIGKILL rounds (default 20; 0 for none)")
    parser.add_argument("--seconds", type=float, default=60.0, help="stop starting rounds after this long")
    parser.add_argument("--senders", type=int, default=4, help="concurrent senders (default 4)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed)")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one, removed)")
    parser.add_argument("--disk-full", type=int, default=0, metavar="CYCLES",
                        help="also fill a small disk under a second app this many times (a tmpfs where the "
                             "machine allows mounting one, else RLIMIT_FSIZE)")
    parser.add_argument("--local", default="all", metavar="CHECKS",
                        help="faults of the local surface to put on it too, comma-separated, from "
                             f"{', '.join(surface_faults.CHECKS)} (default all; none for none)")
    parser.add_argument("--flood", type=int, default=20_000, metavar="N",
                        help="requests the flood check pipelines without reading (default 20000)")
    parser.add_argument("--json", action="store_true", help="print the tally as JSON")
    args = parser.parse_args(argv)
    local = (() if args.local == "none" else surface_faults.CHECKS if args.local == "all"
             else tuple(name.strip() for name in args.local.split(",") if name.strip()))
    if unknown := set(local) - set(surface_faults.CHECKS):
        parser.error(f"unknown --local check(s): {', '.join(sorted(unknown))}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    print(f"faults: seed {seed}, up to {args.rounds} rounds in {args.seconds:.0f}s, {args.senders} senders",
          file=sys.stderr)
    with contextlib.ExitStack() as stack:
        root = args.dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="peerwire-faults-")))
        tally = (Campaign(root, senders=args.senders, seed=seed).run(args.rounds, args.seconds, progress=True)
                 if args.rounds > 0 else Tally())
        if args.disk_full:
            tally.disk_full = disk_full(root, args.disk_full)
        if local:
            tally.local = surface_faults.run(root / "local", local, start_app, flood_requests=args.flood)
    out = {"seed": seed, **asdict(tally), "clean": tally.clean()}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key:<22} {value}")
    return 0 if tally.clean() else 1


if __name__ == "__main__":
    sys.exit(main())
