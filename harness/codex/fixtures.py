"""The recorded app-server exchanges in ``fixtures/appserver/``: one JSON line per message.

:mod:`harness.acceptance.record` writes them from live delivery routes, the
replay (:mod:`harness.lab.recorded.replay`) plays them to the adapter, and
:mod:`.protocol` validates them against a release's generated schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.resources import appserver_fixtures

FIXTURE_DIR = appserver_fixtures()


def load(path: Path) -> list[dict[str, Any]]:
    """The entries of one recorded exchange, in order (blank lines skipped)."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
