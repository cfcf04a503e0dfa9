"""The recorded fixtures still speak the pinned Codex's protocol.

Every request the adapter sent, every notification and every answer in
``fixtures/appserver/`` validates against the schema that the pinned Codex
generates (``codex app-server generate-json-schema``), through the same
checker ``runner.py drift`` runs against other versions
(:func:`harness.codex.protocol.check_fixture`). When Codex changes its protocol
this fails, and ``python runner.py record`` refreshes the fixtures.
"""

from __future__ import annotations

import pytest

from harness.codex.protocol import check_fixture
from harness.codex.fixtures import FIXTURE_DIR

pytestmark = pytest.mark.codex


@pytest.mark.parametrize("fixture", sorted(FIXTURE_DIR.glob("*.jsonl")), ids=lambda p: p.stem)
def test_fixture_validates_against_the_pinned_protocol(fixture, pinned_protocol):
    check = check_fixture(fixture, pinned_protocol)
    assert check.ok, f"{fixture.name}: {check.errors}"
    assert check.checked >= 10
