"""A full disk is ``storage_unavailable``: retriable, distinct from bugs, and it loses nothing.

The store of a real app lives on a small tmpfs that the test fills to the last
block (or, where nothing may be mounted, the app's files are held at their
size with RLIMIT_FSIZE). Every send then either gets its receipt or fails with
``storage_unavailable``; none is ``internal``, the app stays up, nothing
without a receipt is admitted, and once space is back the same calls, retried
with their call ids, go through.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from harness.contract.manifest import requirement
from harness.contract.reference import ReferenceProvisioner
from peerwire.control import ControlClient
from peerwire.errors import Code, PeerwireError
from peerwire_lab.faults import drain, small_disk

SENDS = 400


@pytest.fixture
def core_on_a_small_disk(tmp_path: Path):
    disk = small_disk(tmp_path / "disk")
    core = ReferenceProvisioner(disk.path)
    try:
        core.start()
        yield core, disk
    finally:
        core.stop()
        disk.unmount()


@requirement("storage:full:retriable")
def test_a_full_disk_is_storage_unavailable_and_loses_nothing(core_on_a_small_disk):
    core, disk = core_on_a_small_disk
    a, b = core.register("a"), core.register("b")
    client = ControlClient(core.home, a.token)
    disk.fill(core.app.process.pid)

    receipts, refused = {}, {}
    for n in range(SENDS):
        call_id = f"call_full_{n}"
        try:
            receipts[call_id] = client.call("followup_task", {"target": "b", "message": f"job {n}"},
                                            meta={"call_id": call_id})
        except PeerwireError as error:
            assert error.code is Code.STORAGE_UNAVAILABLE, f"{disk.method}: {error!r}"
            assert error.details["retriable"] is True and "disk" in error.message
            refused[call_id] = n
    assert refused, f"{disk.describe()}: {SENDS} sends all fitted"
    assert ControlClient(core.home).call("status")["ok"] is True, "the app stays up"

    disk.free(core.app.process.pid)
    for call_id, n in refused.items():
        receipts[call_id] = client.call("followup_task", {"target": "b", "message": f"job {n}"},
                                        meta={"call_id": call_id})
    seen = [r["request_id"] for r in drain(ControlClient(core.home, b.token))]
    assert sorted(seen) == sorted(r["request_id"] for r in receipts.values()), "each call admitted exactly once"
    with contextlib.closing(sqlite3.connect(f"{core.home.db.as_uri()}?mode=ro", uri=True)) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
