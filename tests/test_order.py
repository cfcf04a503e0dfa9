"""The session's order (tests/order.py): longest first, heavy tests spread out, durations recorded."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import given, strategies as st

from . import order
from .patience import RUN_S

Item = tuple[str, float, bool]  # name, seconds, heavy


def _schedule(items: list[Item], slots: int = 2, span: int = 8) -> list[Item]:
    return order.schedule(items, lambda i: i[1], lambda i: i[2], slots=slots, span=span)


def test_longest_first_with_ties_in_their_given_order():
    items = [("a", 1.0, False), ("b", 30.0, False), ("c", 1.0, False), ("d", 5.0, False)]
    assert [name for name, _, _ in _schedule(items)] == ["b", "d", "a", "c"]


def test_heavy_tests_wait_for_light_ones_rather_than_crowd_the_slots():
    heavy = [(f"h{n}", 60.0 - n, True) for n in range(4)]
    light = [(f"l{n}", 10.0 - n, False) for n in range(8)]
    names = [name for name, _, _ in _schedule(heavy + light, slots=2, span=4)]
    assert names[:2] == ["h0", "h1"]  # the two longest take the slots at once
    assert names.index("h2") >= 4 and names.index("h3") >= 4


@given(st.lists(st.tuples(st.text(max_size=3), st.floats(0, 100), st.booleans()), max_size=40),
       st.integers(1, 3), st.integers(2, 8))
def test_every_test_runs_once_and_no_window_holds_more_heavy_ones_than_slots_while_light_ones_remain(
        items, slots, span):
    out = _schedule(items, slots, span)
    assert sorted(map(repr, out)) == sorted(map(repr, items))
    last_light = max((n for n, item in enumerate(out) if not item[2]), default=-1)
    for start in range(0, max(last_light - span + 2, 0)):
        assert sum(item[2] for item in out[start:start + span]) <= slots, (start, out)


def test_stored_durations_keep_unrun_records_and_drop_quick_tests(tmp_path):
    path = tmp_path / "durations.json"
    path.write_text(json.dumps({"t::kept": 12.0, "t::remeasured": 40.0}))
    order.store(path, {"t::remeasured": 3.456, "t::quick": 0.2, "t::new": 2.0})
    assert json.loads(path.read_text()) == {"t::kept": 12.0, "t::new": 2.0, "t::remeasured": 3.46}


def test_the_session_records_durations_of_what_it_ran(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "import sys\nsys.path.insert(0, %r)\nfrom tests import order\n" % str(order.DURATIONS.parents[1])
        + "from tests.conftest import pytest_addoption, pytest_runtest_logreport, pytest_sessionfinish\n"
        + "order.DURATIONS = __import__('pathlib').Path(%r)\n" % str(tmp_path / "d.json"))
    (tmp_path / "test_x.py").write_text("import time\ndef test_slow():\n    time.sleep(1.1)\n\ndef test_quick():\n    pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--store-durations", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=RUN_S)
    assert done.returncode == 0, done.stdout + done.stderr
    stored = json.loads((tmp_path / "d.json").read_text())
    assert list(stored) == ["test_x.py::test_slow"] and stored["test_x.py::test_slow"] >= 1.1


def test_the_recorded_durations_name_tests_that_exist():
    """A renamed test's record would schedule nothing: refresh with `make test PYTEST_ARGS=... --store-durations`."""
    assert order.recorded(), "tests/durations.json is missing"
    assert all("::" in nodeid and nodeid.startswith("tests/") for nodeid in order.recorded())
