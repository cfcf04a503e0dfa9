"""A store that knows it is itself: no receipt for a record the home's store does not hold.

While the app runs, the store file (or its ``-wal`` or ``-shm``) can be
deleted, replaced, cut short or swapped for an older copy. SQLite would go on
committing into the file it opened; the app instead refuses the next write
with ``store_damaged``, hands out no receipt and leaves the high-water mark as
it was. At start-up, a store that is missing, another home's, or behind the
records the home receipted is refused (exit status 5) unless the operator
starts the app with ``--accept-store-loss``; the loss is then recorded.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.process.app import AppProcess
from peerwire.control import ControlClient
from peerwire.errors import Code, PeerwireError
from peerwire.home import Home
from tests.patience import WAIT_S

SENT = 10


def _sending(core, tmp_path: Path) -> tuple[ControlClient, ControlClient]:
    """Receipts for :data:`SENT` records; a copy of the store is kept midway (what a rollback restores)."""
    a, b = core.register("a"), core.register("b")
    sender, mailbox = ControlClient(core.home, a.token), ControlClient(core.home, b.token)
    for n in range(SENT):
        if n == SENT // 2:
            with sqlite3.connect(core.home.db) as db, sqlite3.connect(tmp_path / "older.db") as into:
                db.backup(into)
            db.close()
            into.close()
        sender.call("send_message", {"target": "b", "message": f"record {n}"})
    return sender, mailbox


def _checkpoint(home: Home) -> None:
    # The probe: the records are in peerwire.db itself, not only in its write-ahead log.
    with sqlite3.connect(home.db) as db:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    db.close()


def _other_store(tmp_path: Path) -> Path:
    other = Home(tmp_path / "other-home")
    other.prepare()
    other.open_store().close()
    return other.db


def _deleted(home: Home, tmp_path: Path) -> None:
    home.db.unlink()


def _replaced(home: Home, tmp_path: Path) -> None:
    os.replace(_other_store(tmp_path), home.db)


def _truncated(home: Home, tmp_path: Path) -> None:
    os.truncate(home.db, os.path.getsize(home.db) // 2)


def _rolled_back(home: Home, tmp_path: Path) -> None:
    # The copy kept midway, put in place as backup tools do (a rename).
    os.replace(tmp_path / "older.db", home.db)


def _wal_removed(home: Home, tmp_path: Path) -> None:
    home.wal.unlink()


def _shm_removed(home: Home, tmp_path: Path) -> None:
    (home.path / "peerwire.db-shm").unlink()


WHILE_RUNNING = [_deleted, _replaced, _truncated, _rolled_back, _wal_removed, _shm_removed]


@pytest.mark.parametrize("change", WHILE_RUNNING, ids=lambda f: f.__name__.strip("_").replace("_", "-"))
def test_a_store_changed_under_the_running_app_gets_no_receipt(core, tmp_path, change):
    sender, mailbox = _sending(core, tmp_path)
    _checkpoint(core.home)
    sender.call("send_message", {"target": "b", "message": "after the checkpoint"})
    mark = core.home.mark.read_bytes()
    change(core.home, tmp_path)
    for attempt in range(2):  # and it stays refused: the next call does not commit into the orphan either
        with pytest.raises(PeerwireError) as refused:
            sender.call("send_message", {"target": "b", "message": f"after the change {attempt}"})
        assert refused.value.code == Code.STORE_DAMAGED, refused.value
        assert refused.value.details["retriable"] is False
        assert refused.value.details["file"].startswith(str(core.home.db)), refused.value.details
    assert core.home.mark.read_bytes() == mark, "a refused write moves nothing outside the store"
    assert core.app.process.poll() is None, "the app stays up and says why"


def _refused_start(home: Home) -> subprocess.CompletedProcess:
    """``peerwire app`` on a store it must refuse: it exits before its ready line (the bound catches one that
    does not)."""
    return subprocess.run([sys.executable, "-m", "peerwire", "app", "--home", str(home.path)],
                          capture_output=True, text=True, timeout=WAIT_S, stdin=subprocess.DEVNULL)


AT_START_UP = [_deleted, _replaced, _truncated, _rolled_back]


@pytest.mark.parametrize("change", AT_START_UP, ids=lambda f: f.__name__.strip("_").replace("_", "-"))
def test_a_store_that_is_not_the_homes_own_is_refused_at_start_up(core, tmp_path, change):
    _sending(core, tmp_path)
    core.stop_app()
    change(core.home, tmp_path)
    refused = _refused_start(core.home)
    assert refused.returncode == 5, refused.stderr
    line, = refused.stderr.strip().splitlines()[-1:]
    assert line.startswith("peerwire app: store_damaged: ") and str(core.home.db) in line, refused.stderr
    if change is not _truncated:  # a cut file is damaged whatever the operator accepts
        assert "--accept-store-loss" in line, line
        assert not core.home.db.exists() or change is not _deleted, "a refusal creates nothing"
        core.app = AppProcess.start(core.home, args=("--accept-store-loss",))
        losses = ControlClient(core.home).call("status")["losses"]
        assert losses and losses[-1]["last_seq"] >= SENT, losses
        # Accepted once: the mark follows the store served now, and a plain restart serves it.
        core.stop_app()
        core.app = AppProcess.start(core.home)


def _node_id(home: Home) -> str:
    with sqlite3.connect(f"file:{home.db}?mode=ro", uri=True) as db:
        node_id = db.execute("SELECT value FROM meta WHERE key = 'node_id'").fetchone()[0]
    db.close()
    return node_id


def test_a_clean_restart_and_a_kill_serve_the_same_store(core, tmp_path):
    _, mailbox = _sending(core, tmp_path)
    core.stop_app()
    core.start_app()
    core.restart()  # kill -9, then start
    assert len(mailbox.call("receive_messages", {"limit": 100})["records"]) == SENT
    assert ControlClient(core.home).call("status")["losses"] == []


def test_a_mark_from_before_the_identity_adopts_its_store_and_then_knows_it(core, tmp_path):
    _sending(core, tmp_path)
    core.stop_app()
    seq = core.home.mark.read_text().split()[0]
    core.home.mark.write_text(f"{seq}\n")  # as a peerwire from before the identity wrote it
    core.start_app()
    core.stop_app()
    assert core.home.mark.read_text().split() == [seq, _node_id(core.home)]
    _replaced(core.home, tmp_path)
    assert _refused_start(core.home).returncode == 5
    core.app = AppProcess.start(core.home, args=("--accept-store-loss",))


@pytest.mark.parametrize("mode", [0o600, 0o644], ids=["private", "tightened-at-start"])
def test_a_reader_in_another_process_leaves_the_running_apps_log_alone(core, tmp_path, mode):
    # SQLite deletes the write-ahead log when the last connection closes; it asks the POSIX locks whether it is
    # the last, and a descriptor the app closed on the store's files (to tighten them) drops the app's own.
    core.stop_app()
    core.home.db.chmod(mode)
    core.start_app()
    assert core.home.db.stat().st_mode & 0o777 == 0o600
    sender, mailbox = _sending(core, tmp_path)  # its midway copy is such a reader
    with sqlite3.connect(core.home.db) as reader:
        assert reader.execute("SELECT COUNT(*) FROM agents").fetchone()[0] == 2
    reader.close()
    assert core.home.wal.exists()
    sender.call("send_message", {"target": "b", "message": "after the reader"})
    assert len(mailbox.call("receive_messages", {"limit": 100})["records"]) == SENT + 1
