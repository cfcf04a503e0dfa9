"""A short fault campaign in every test run: kill -9 rounds, dropped answers, abandoned polls, a full disk,
and some of the local surface's faults (the others have tests of their own: tests/core/test_hung_app.py,
tests/core/test_bad_home.py, tests/harness/test_orphans.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.patience import RUN_S

ROUNDS = 3


@pytest.mark.slow
def test_a_short_campaign_loses_nothing_and_duplicates_nothing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "peerwire_lab.faults", "--rounds", str(ROUNDS), "--seconds", "30",
                           "--disk-full", "1", "--local", "none", "--dir", str(tmp_path), "--json"],
                          capture_output=True, text=True, timeout=RUN_S)
    tally = json.loads(done.stdout)
    assert done.returncode == 0, (tally, done.stderr[-2000:])
    assert tally["crashes"] == tally["rounds"] >= 1 and tally["receipts"] > 0
    for must_be_zero in ("losses", "duplicate_records", "duplicate_exposures", "lost_exposures", "integrity_failed"):
        assert tally[must_be_zero] == 0, (must_be_zero, tally)
    assert tally["integrity_ok"] == tally["crashes"] + 1, "a check after every kill and one at the end"
    assert tally["exposed"] == tally["tasks"] >= tally["receipts"]
    full = tally["disk_full"]
    assert full["failures"] == 0 and full["integrity"] is True, full
    assert full["storage_unavailable"] > 0 and full["receipts"] == full["sends"], full


def test_the_local_surface_checks_find_nothing(tmp_path):
    """A few seconds of the local surface's faults: a held lock, a damaged WAL, a small unread flood."""
    done = subprocess.run([sys.executable, "-m", "peerwire_lab.faults", "--rounds", "0", "--local", "lock,wal,flood",
                           "--flood", "3000", "--dir", str(tmp_path), "--json"],
                          capture_output=True, text=True, timeout=RUN_S)
    tally = json.loads(done.stdout)
    assert done.returncode == 0 and tally["clean"], (tally, done.stderr[-2000:])
    local = tally["local"]
    assert set(local) == {"lock", "wal", "flood"}
    assert local["lock"]["exit"] == 3 and local["lock"]["lock_untouched"]
    assert local["wal"]["lost"] > 0 and local["wal"]["reported"] and local["wal"]["silent_losses"] == 0
    assert local["flood"]["answered"] == 3000 and local["flood"]["growth_mb"] < 64
