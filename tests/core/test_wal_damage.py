"""Receipted records lost with a damaged write-ahead log are noticed, never lost silently.

After kill -9 the store's last commits live only in ``peerwire.db-wal``. A
flipped byte or a cut makes SQLite drop every frame from the damaged one on,
and the store opens whole but without them. The high-water mark kept beside
the store (``peerwire.db-mark``, outside the WAL, advanced before a receipt is
returned) says how far commits went: the app refuses the store, naming the
missing records; started with ``--accept-store-loss`` it names the file and
the missing records in one line before it serves, and never hands out their
sequence numbers again.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.process.app import AppProcess
from peerwire.control import ControlClient
from tests.patience import WAIT_S

RECORDS = 30


def _admit(core) -> tuple[ControlClient, ControlClient, list[int]]:
    a, b = core.register("a"), core.register("b")
    sender, mailbox = ControlClient(core.home, a.token), ControlClient(core.home, b.token)
    for n in range(RECORDS):
        sender.call("send_message", {"target": "b", "message": f"record {n}"})
    seqs = [record["seq"] for record in mailbox.call("receive_messages", {"limit": 100})["records"]]
    assert len(seqs) == RECORDS
    return sender, mailbox, seqs


def _flip(wal, at: float) -> None:
    with open(wal, "r+b") as f:
        f.seek(int(os.path.getsize(wal) * at))
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))


def _cut(wal, at: float) -> None:
    with open(wal, "r+b") as f:
        f.truncate(int(os.path.getsize(wal) * at))


@pytest.mark.parametrize("damage", [_flip, _cut], ids=["flipped-byte", "truncated"])
def test_records_lost_with_a_damaged_wal_are_named_before_the_app_serves(core, damage):
    sender, mailbox, seqs = _admit(core)
    core.app.kill()
    wal = core.home.path / "peerwire.db-wal"
    assert wal.stat().st_size > 0, "the commits are still in the write-ahead log"
    damage(wal, 0.6)
    before = {name: (core.home.path / name).read_bytes() for name in ("peerwire.db", "peerwire.db-wal")}
    refused = subprocess.run([sys.executable, "-m", "peerwire", "app", "--home", str(core.home.path)],
                             capture_output=True, text=True, timeout=WAIT_S, stdin=subprocess.DEVNULL)
    assert refused.returncode == 5, refused.stderr
    assert f"receipted records up to seq {max(seqs)}" in refused.stderr, refused.stderr
    assert "--accept-store-loss" in refused.stderr, refused.stderr
    after = {name: (core.home.path / name).read_bytes() for name in before}
    assert after == before, "a refused store keeps its write-ahead log, damage included, for whoever rescues it"
    core.app = AppProcess.start(core.home, args=("--accept-store-loss",))
    left = [r["seq"] for r in mailbox.call("receive_messages", {"limit": 100})["records"]]
    assert len(left) < RECORDS, "the damage was meant to cost records"
    lines = [line for line in core.app.log.read_text().splitlines() if "missing" in line]
    assert len(lines) == 1, core.app.log.read_text()[-3000:]
    assert str(wal) in lines[0] and f"{RECORDS - len(left)} receipted records" in lines[0], lines[0]
    assert f"{max(seqs)}" in lines[0], lines[0]
    # Serving: a new record never takes a sequence number a lost one had.
    sender.call("send_message", {"target": "b", "message": "after the loss"})
    newest = mailbox.call("receive_messages", {"limit": 100})["records"][-1]
    assert newest["body"] == "after the loss" and newest["seq"] > max(seqs), newest
    # Said once, and accepted once: the next start, without the flag, has nothing new to say.
    core.app.terminate()
    core.app = AppProcess.start(core.home)
    assert len([line for line in core.app.log.read_text().splitlines() if "missing" in line]) == 1


def test_an_undamaged_wal_after_kill_9_reports_nothing(core):
    _, mailbox, seqs = _admit(core)
    core.app.kill()
    core.app = AppProcess.start(core.home)
    assert [r["seq"] for r in mailbox.call("receive_messages", {"limit": 100})["records"]] == seqs
    assert "missing" not in core.app.log.read_text()
