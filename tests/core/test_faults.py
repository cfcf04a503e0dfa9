"""A short fault campaign in every test run: kill -9 rounds, dropped answers, abandoned polls, a full disk."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.patience import RUN_S

ROUNDS = 3


@pytest.mark.slow
def test_a_short_campaign_loses_nothing_and_duplicates_nothing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "peerwire.faults", "--rounds", str(ROUNDS), "--seconds", "30",
                           "--disk-full", "1", "--dir", str(tmp_path), "--json"],
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
