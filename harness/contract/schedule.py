"""The order the suite runs in: the longest requirements first, so their wall time overlaps the rest.

Some requirements must watch real time pass (a 30 s default wait times out no
sooner than 30 s) and a few run long (the wire fuzz). Run last, each adds its
whole length to the suite's wall time; started first, each overlaps the
others' work on another worker, and the suite takes about as long as its
longest requirement. A case's length is its longest ``not_before_ms``; a suite
test declares its own with ``@pytest.mark.long_running(seconds)``.

Long items are spread so that each worker starts one: pytest-xdist's load
scheduler hands each worker two consecutive items first and then, the run
handing out tests one at a time (``--maxschedchunk 1``), tops each up to two as
they finish. Each long item is therefore followed by one short one, so that no
worker holds two long items while another holds none, and a short test is never
queued behind a long one on a busy worker while another worker idles.
"""

from __future__ import annotations

import pytest

from .cases import Case

MARKER = "long_running"
MARKER_HELP = (f"{MARKER}(seconds): a requirement that takes about this long (real-time waits, a fuzz); "
               "the contract suite starts it first so that it overlaps the rest")


def expected_seconds(item: pytest.Item) -> float:
    """How long ``item`` takes at least, as its case data or its marker say (0 when short)."""
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        return float(marker.args[0])
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("case") if callspec is not None else None
    return case.real_time_ms / 1000 if isinstance(case, Case) else 0.0


def longest_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` with the long ones first, longest first, each followed by one short one; the rest in order.

    With two workers or more, a worker's queue holds two items (see above), so
    each long item is paired with a short one and every worker starts a long
    item of its own; with one process the long items simply come first.
    """
    long_items = sorted((i for i in items if expected_seconds(i) > 0), key=expected_seconds, reverse=True)
    short = [i for i in items if expected_seconds(i) == 0]
    ordered: list[pytest.Item] = []
    for item in long_items:
        ordered.append(item)
        if workers > 1 and short:
            ordered.append(short.pop(0))
    return ordered + short
