"""Faults of the local surface, for the fault campaign (``python -m peerwire_lab.faults --local ...``).

Each check puts one fault on a real app, real ``mcp serve`` processes and real
files, and counts what went wrong; every count named in ``failures`` must be
zero:

``hung``     the app stopped with SIGSTOP while MCP sessions send tasks (half of them
             cancelled by their client) and wait: every call not cancelled is answered
             ``app_not_responding`` within its bound (``hung_calls`` counts those that
             were not); after SIGCONT every task is retried with its call id and must be
             admitted exactly once (``lost``, ``duplicated``);
``lock``     another process holds the home's lock: the app refuses at once with
             ``home_locked`` (exit 3) and the lock stays with its holder;
``flood``    requests pipelined into ``mcp serve`` and never read: its memory stays
             within :data:`FLOOD_BOUND_MB` of where it started (``peak_mb``, ``growth_mb``);
``planted``  a symbolic link at each file of a home, each file owned by another user
             (as root), another program's SQLite database: the app refuses each, follows
             no link (``followed``), serves no foreign file (``served_foreign``) and
             leaves the database byte for byte (``foreign_db_changed``);
``wal``      receipted records, kill -9, a flipped byte in the write-ahead log: what the
             damage cost is named in one line before the app serves (``silent_losses``);
``orphans``  a runner-shaped process tree (:mod:`harness.process.tree_probe`) whose
             runner and worker are SIGKILLed together: nothing of it outlives them.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from harness.contract import unread_flood
from peerwire.control import ControlClient, answer_bound
from peerwire.home import HOME_ENV, SESSION_ENV, Home
from peerwire.home_files import FILES
from peerwire.limits import CODEX_TOOL_TIMEOUT_S

CHECKS = ("hung", "lock", "flood", "planted", "wal", "orphans")
FLOOD_BOUND_MB = 64
READY_S = 30.0


class McpSession:
    """A real ``peerwire mcp serve`` spoken to line by line; answers are collected by id as they come."""

    def __init__(self, env: dict[str, str]):
        self.process = subprocess.Popen([sys.executable, "-m", "peerwire", "mcp", "serve"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.answers: dict[Any, tuple[float, dict]] = {}
        self._arrived = threading.Condition()
        self._ids = iter(range(1, 1 << 30))
        threading.Thread(target=self._read, daemon=True).start()
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "faults", "version": "1"}})

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            with self._arrived:
                self.answers[message.get("id")] = (time.monotonic(), message)
                self._arrived.notify_all()

    def send(self, method: str, params: dict[str, Any], msg_id: Any = None) -> Any:
        msg_id = next(self._ids) if msg_id is None else msg_id
        self._write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def _write(self, message: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def wait(self, msg_id: Any, timeout: float) -> dict | None:
        with self._arrived:
            self._arrived.wait_for(lambda: msg_id in self.answers, timeout)
            return self.answers.get(msg_id, (0, None))[1]

    def call(self, method: str, params: dict[str, Any], timeout: float = READY_S) -> dict | None:
        return self.wait(self.send(method, params), timeout)

    def close(self) -> None:
        for pipe in (self.process.stdin,):
            if pipe is not None:
                pipe.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def drain(mailbox: Any) -> list[dict[str, Any]]:
    """Every record of a caller's mailbox (a :class:`~peerwire.control.ControlClient`), acknowledged as read."""
    records: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = mailbox.call("receive_messages", {"limit": 100, **({"ack_cursor": cursor} if cursor else {})})
        if not page["records"]:
            return records
        records += page["records"]
        cursor = page["cursor"]


def _code(answer: dict | None) -> str | None:
    result = (answer or {}).get("result") or {}
    return ((result.get("structuredContent") or {}).get("error") or {}).get("code") if result.get("isError") else None


def hung(root: Path, start_app: Callable[[Home], subprocess.Popen], *, sessions: int = 3, tasks: int = 4) -> dict:
    home = Home(root / "hung")
    home.prepare()
    app = start_app(home)
    out: dict[str, Any] = {"calls": 0, "cancelled": 0, "app_not_responding": 0, "hung_calls": 0, "slowest_s": 0.0,
                           "retried": 0, "lost": 0, "duplicated": 0}
    clients: list[McpSession] = []
    try:
        admin = ControlClient(home)
        writer = admin.call("register_agent", {"name": "writer"})["session_token"]
        inbox = admin.call("register_agent", {"name": "inbox"})["session_token"]
        env = {**os.environ, HOME_ENV: str(home.path), SESSION_ENV: writer}
        clients = [McpSession(env) for _ in range(sessions)]
        for client in clients:
            client.call("tools/call", {"name": "list_agents", "arguments": {}})  # connected before the hang
        calls: list[tuple[McpSession, Any, str | None, float]] = []  # session, id, call id, bound
        os.kill(app.pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            for n, client in enumerate(clients):
                for k in range(tasks):
                    call_id = f"hung-{n}-{k}"
                    msg_id = client.send("tools/call", {"name": "followup_task", "_meta": {"callId": call_id},
                                                        "arguments": {"target": "inbox", "message": call_id}})
                    calls.append((client, msg_id, call_id, answer_bound(0)))
                msg_id = client.send("tools/call", {"name": "wait_agent", "arguments": {"timeout_ms": 1000}})
                calls.append((client, msg_id, None, answer_bound(1)))
            cancelled = {(id(c), m) for c, m, call_id, _ in calls[::2] if call_id is not None}
            time.sleep(0.5)  # the clients give up on half the tasks while the app hangs
            for client, msg_id, _, _ in calls:
                if (id(client), msg_id) in cancelled:
                    client.notify("notifications/cancelled", {"requestId": msg_id, "reason": "gave up"})
            out["calls"], out["cancelled"] = len(calls), len(cancelled)
            for client, msg_id, _, _ in calls:
                if (id(client), msg_id) in cancelled:
                    continue
                answer = client.wait(msg_id, max(0.0, CODEX_TOOL_TIMEOUT_S - (time.monotonic() - began)))
                if answer is None:
                    out["hung_calls"] += 1
                    continue
                out["slowest_s"] = round(max(out["slowest_s"], client.answers[msg_id][0] - began), 2)
                if _code(answer) == "app_not_responding":
                    out["app_not_responding"] += 1
        finally:
            os.kill(app.pid, signal.SIGCONT)
        for client, _msg_id, call_id, _ in calls:
            if call_id is None:
                continue
            out["retried"] += 1
            answer = client.call("tools/call", {"name": "followup_task", "_meta": {"callId": call_id},
                                                "arguments": {"target": "inbox", "message": call_id}})
            if answer is None or _code(answer) is not None:
                out["lost"] += 1
        bodies = [r["body"] for r in drain(ControlClient(home, inbox)) if r["kind"] == "task"]
        wanted = {call_id for _, _, call_id, _ in calls if call_id}
        out["lost"] = max(out["lost"], len(wanted - set(bodies)))
        out["duplicated"] = len(bodies) - len(set(bodies))
        out["not_answered_as_hung"] = out["calls"] - out["cancelled"] - out["app_not_responding"] - out["hung_calls"]
    finally:
        for client in clients:
            client.close()
        app.terminate()
        app.wait(READY_S)
    out["failures"] = out["hung_calls"] + out["lost"] + out["duplicated"] + out["not_answered_as_hung"]
    return out


def held_lock(root: Path) -> dict:
    import fcntl

    home = Home(root / "locked")
    home.prepare()
    fd = os.open(home.lock, os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, b'{"pid": "someone else"}')
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "peerwire", "app", "--home", str(home.path)], capture_output=True,
                              text=True, timeout=READY_S)
        seconds = round(time.monotonic() - began, 2)
        still_held = os.pread(fd, 64, 0) == b'{"pid": "someone else"}'
    finally:
        os.close(fd)
    refused = done.returncode == 3 and "home_locked" in done.stderr
    return {"exit": done.returncode, "seconds": seconds, "lock_untouched": still_held,
            "failures": int(not refused) + int(not still_held)}


def flood(requests: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (HOME_ENV, SESSION_ENV)}
    figures = unread_flood.flood([sys.executable, "-m", "peerwire", "mcp", "serve"], env,
                                 unread_flood.tools_list(requests), give_up_mb=10 * FLOOD_BOUND_MB)
    return {**figures.to_json(), "failures": int(figures.growth_mb >= FLOOD_BOUND_MB)
            + int(figures.answered < requests)}


def _app_exit(home: Path) -> int:
    env = {k: v for k, v in os.environ.items() if k not in (HOME_ENV, SESSION_ENV)}
    process = subprocess.Popen([sys.executable, "-m", "peerwire", "app", "--home", str(home)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        line = process.stdout.readline() if process.stdout else b""  # a ready line, or end of file when refused
        if line.startswith(b'{"event": "ready"'):
            process.terminate()
            process.wait(READY_S)
            return 0
        return process.wait(READY_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _real_store(home: Path) -> None:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    Home(home).prepare()
    Home(home).open_store().close()


def planted(root: Path) -> dict:
    out: dict[str, Any] = {"links": 0, "followed": 0, "foreign_files": 0, "served_foreign": 0,
                           "foreign_db_changed": 0, "foreign_db_served": 0}
    for name in FILES:
        home = root / f"link-{name}"
        _real_store(home)
        (home / name).unlink(missing_ok=True)
        target = root / f"target-{name}"
        target.write_bytes(b"not peerwire's\n")
        (home / name).symlink_to(target)
        out["links"] += 1
        if _app_exit(home) == 0 or target.read_bytes() != b"not peerwire's\n":
            out["followed"] += 1
    if os.geteuid() == 0:
        for name in FILES:
            if name == "control.sock":
                continue
            home = root / f"foreign-{name}"
            _real_store(home)
            path = home / name
            if not path.exists():
                path.write_bytes(b"")
            os.chown(path, 4242, 4242)
            out["foreign_files"] += 1
            if _app_exit(home) == 0:
                out["served_foreign"] += 1
    else:
        out["foreign_files"] = "not run: not root (chown to another uid needs root)"
    home = root / "foreign-db"
    home.mkdir(mode=0o700)
    with sqlite3.connect(home / "peerwire.db") as db:
        db.executescript("CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('one'); PRAGMA user_version = 3;")
    db.close()
    before = hashlib.sha256((home / "peerwire.db").read_bytes()).hexdigest()
    out["foreign_db_served"] = int(_app_exit(home) == 0)
    out["foreign_db_changed"] = int(hashlib.sha256((home / "peerwire.db").read_bytes()).hexdigest() != before
                                    or (home / "peerwire.db-wal").exists())
    out["failures"] = out["followed"] + out["served_foreign"] + out["foreign_db_changed"] + out["foreign_db_served"]
    return out


def damaged_wal(root: Path, start_app: Callable[..., subprocess.Popen], records: int = 30) -> dict:
    home = Home(root / "wal")
    home.prepare()
    app = start_app(home)
    admin = ControlClient(home)
    sender = ControlClient(home, admin.call("register_agent", {"name": "sender"})["session_token"])
    mailbox = ControlClient(home, admin.call("register_agent", {"name": "mailbox"})["session_token"])
    for n in range(records):
        sender.call("send_message", {"target": "mailbox", "message": f"record {n}"})
    app.kill()
    app.wait()
    with open(home.wal, "r+b") as wal:
        wal.seek(int(os.path.getsize(home.wal) * 0.6))
        byte = wal.read(1)
        wal.seek(-1, os.SEEK_CUR)
        wal.write(bytes([byte[0] ^ 0xFF]))
    log = home.path.parent / "app-stderr.log"
    log.write_text("")
    refused = _app_exit(home.path) == 5  # a store behind its mark is refused (store_damaged) until accepted
    app = start_app(home, "--accept-store-loss")
    try:
        left = len(mailbox.call("receive_messages", {"limit": 100})["records"])
    finally:
        app.terminate()
        app.wait(READY_S)
    lines = [line for line in log.read_text().splitlines() if "missing" in line and str(home.wal) in line]
    lost = records - left
    reported = refused and len(lines) == 1 and f"{lost} receipted records" in lines[0]
    return {"receipted": records, "lost": lost, "refused": refused, "reported": reported,
            "silent_losses": 0 if reported or not lost else lost,
            "failures": 0 if reported or not lost else lost}


def orphans(root: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "harness.process.tree_probe", "count", "--dir", str(root / "tree")],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return {"not_run": (done.stderr.strip().splitlines() or ["harness.process.tree_probe failed"])[-1],
                "failures": 0}
    counted = json.loads(done.stdout)
    return {**counted, "failures": len(counted["orphans"])}


def run(root: Path, checks: tuple[str, ...], start_app: Callable[[Home], subprocess.Popen], *,
        flood_requests: int) -> dict[str, dict]:
    """Run ``checks`` (names from :data:`CHECKS`) under ``root``; each check's figures, ``failures`` included."""
    root.mkdir(parents=True, exist_ok=True)
    runners = {"hung": lambda: hung(root, start_app), "lock": lambda: held_lock(root),
               "flood": lambda: flood(flood_requests), "planted": lambda: planted(root / "planted"),
               "wal": lambda: damaged_wal(root, start_app), "orphans": lambda: orphans(root)}
    out = {}
    for name in checks:
        began = time.monotonic()
        print(f"faults: {name} ...", file=sys.stderr)
        out[name] = {**runners[name](), "seconds": round(time.monotonic() - began, 1)}
    return out
