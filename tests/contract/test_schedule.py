"""The contract suite's order: long requirements first, one per worker, short ones after."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from harness.contract.cases import all_cases
from harness.contract.schedule import MARKER, expected_seconds, longest_first


@dataclass
class Callspec:
    params: dict[str, Any]


@dataclass
class Item:
    """Just what the schedule reads of a pytest item: its marker and its case."""

    name: str
    seconds: float | None = None
    callspec: Callspec | None = None

    def get_closest_marker(self, name: str):
        return SimpleNamespace(args=(self.seconds,)) if name == MARKER and self.seconds else None


def test_a_case_lasts_its_longest_real_time_wait():
    by_id = {case.id: case for case in all_cases()}
    default_wait = by_id["collab-wait/wait-timeout-default"]
    assert default_wait.real_time_ms == max(s.outcome.not_before_ms or 0 for s in default_wait.steps) > 0
    assert expected_seconds(Item("case", callspec=Callspec({"case": default_wait}))) == default_wait.real_time_ms / 1000
    quick = next(c for c in all_cases() if c.real_time_ms == 0)
    assert expected_seconds(Item("quick", callspec=Callspec({"case": quick}))) == 0


def test_long_items_come_first_longest_first_each_followed_by_a_short_one():
    # pytest-xdist hands each worker two consecutive items first: every worker gets one long item and one short
    items = [Item("s1"), Item("l10", 10), Item("s2"), Item("s3"), Item("l60", 60), Item("s4"), Item("l30", 30)]
    assert [i.name for i in longest_first(items, workers=2)] == ["l60", "s1", "l30", "s2", "l10", "s3", "s4"]
    assert [i.name for i in longest_first(items, workers=3)] == ["l60", "s1", "l30", "s2", "l10", "s3", "s4"]
    assert [i.name for i in longest_first(items, workers=1)] == ["l60", "l30", "l10", "s1", "s2", "s3", "s4"]
    short_only = [Item("a"), Item("b")]
    assert longest_first(short_only, workers=2) == short_only
