"""Shard plans: every case in exactly one shard, the same plan wherever it is computed, balanced work."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.shards import Shard, ShardError, load_durations, plan, write_durations

CASES = st.lists(st.text(alphabet="abcdefgh.-_/[]:", min_size=1, max_size=12), unique=True, max_size=40)
DURATIONS = st.dictionaries(st.text(alphabet="abcdefgh.-_/[]:", min_size=1, max_size=12),
                            st.floats(min_value=0, max_value=600, allow_nan=False), max_size=40)


@given(cases=CASES, count=st.integers(min_value=1, max_value=9), durations=DURATIONS, seed=st.integers())
def test_every_case_runs_in_exactly_one_shard_whatever_the_order(cases, count, durations, seed):
    split = plan(cases, count, durations)
    shards = [split.cases(index) for index in range(1, count + 1)]
    assert sorted(case for shard in shards for case in shard) == sorted(cases), "each case once, none lost"
    shuffled = list(cases)
    random.Random(seed).shuffle(shuffled)
    again = plan(shuffled, count, dict(reversed(list(durations.items()))))
    assert again.assignment == split.assignment and again.digest == split.digest


@given(cases=CASES, count=st.integers(min_value=1, max_value=9), durations=DURATIONS)
def test_no_shard_carries_more_than_its_share_plus_one_case(cases, count, durations):
    split = plan(cases, count, durations)
    loads = split.loads()
    if cases:
        # Greedy longest-first: the heaviest shard exceeds the mean by less than the longest case.
        assert max(loads) <= sum(loads) / count + max(split.estimates.values()) + 1e-6
    assert len(loads) == count


def test_recorded_durations_decide_the_split_and_unknown_cases_count_as_the_median():
    durations = {"slow": 60.0, "a": 10.0, "b": 10.0, "c": 10.0}
    split = plan(["slow", "a", "b", "c", "new"], 2, durations)
    assert split.cases(1) == ["slow"] and split.cases(2) == ["a", "b", "c", "new"]
    assert split.estimates["new"] == 10.0 and split.known == 4
    assert plan(["x", "y", "z"], 2).loads() == [2.0, 1.0], "nothing known: one unit each"


def test_the_digest_changes_with_the_split():
    assert plan(["a", "b"], 2).digest != plan(["a", "b"], 1).digest != plan(["a", "b", "c"], 1).digest


def test_more_shards_than_cases_leaves_some_empty():
    split = plan(["only"], 3)
    assert [split.cases(i) for i in (1, 2, 3)] == [["only"], [], []]


def test_a_case_listed_twice_is_refused():
    with pytest.raises(ShardError, match="more than once: a"):
        plan(["a", "b", "a"], 2)


@pytest.mark.parametrize("text", ["", "1", "0/4", "5/4", "1/0", "-1/4", "1/4/2", "one/four"])
def test_bad_shard_specs_are_refused(text):
    with pytest.raises(ShardError, match="--shard"):
        Shard.parse(text)


def test_shard_specs_parse():
    assert Shard.parse("2/4") == Shard(2, 4) and str(Shard.parse(" 1 / 1 ")) == "1/1"


def test_durations_files_round_trip_and_bad_ones_are_named(tmp_path):
    path = write_durations(tmp_path / "durations.json", {"acceptance": {"b": 2.0004, "a": 1}, "contract": {}})
    assert json.loads(path.read_text()) == {"acceptance": {"a": 1.0, "b": 2.0}}
    assert load_durations(path, "acceptance") == {"a": 1.0, "b": 2.0}
    assert load_durations(path, "contract") == {} and load_durations(tmp_path / "none.json", "contract") == {}
    (tmp_path / "bad.json").write_text('{"acceptance": {"a": "slow"}}')
    with pytest.raises(ShardError, match="bad.json"):
        load_durations(tmp_path / "bad.json", "acceptance")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ShardError, match="not JSON"):
        load_durations(tmp_path / "broken.json", "acceptance")
