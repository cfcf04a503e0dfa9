"""Shard plans: every case in exactly one shard, the same plan wherever it is computed, balanced work."""

from __future__ import annotations

import json
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.shards import UNKNOWN_S, Shard, ShardError, load_durations, plan, write_durations

NAME = st.text(alphabet="abcdefgh.-_/[]:", min_size=1, max_size=12)
CASES = st.lists(NAME, unique=True, max_size=40)
SECONDS = st.floats(min_value=0, max_value=600, allow_nan=False)


@st.composite
def recorded(draw, cases):
    """Durations as a file holds them: some of the cases (not all), and cases no longer selected."""
    known = draw(st.lists(st.sampled_from(cases), unique=True)) if cases else []
    stale = draw(st.dictionaries(NAME, SECONDS, max_size=5))
    return {**stale, **{case: draw(SECONDS) for case in known}}


@given(data=st.data(), cases=CASES, count=st.integers(min_value=1, max_value=9))
def test_every_case_runs_in_exactly_one_shard_whatever_the_order(data, cases, count):
    durations = data.draw(recorded(cases))
    # Each shard is computed on its own, as N machines do: the selection in another order, the
    # durations file's entries in another order; together the shards hold every case once.
    shards = []
    for index in range(1, count + 1):
        order = data.draw(st.permutations(cases))
        entries = data.draw(st.permutations(list(durations.items())))
        shards.append(plan(order, count, dict(entries)).cases(index, order))
    ran = [case for shard in shards for case in shard]
    assert sorted(ran) == sorted(cases) and len(ran) == len(set(ran)), "each case once, none lost"
    assert len({plan(data.draw(st.permutations(cases)), count, durations).digest for _ in range(2)}) == 1


@given(data=st.data(), cases=CASES, count=st.integers(min_value=1, max_value=9))
def test_no_shard_carries_more_than_its_share_plus_one_case(data, cases, count):
    split = plan(cases, count, data.draw(recorded(cases)))
    loads = split.loads()
    assert len(loads) == count
    if cases:
        # Greedy longest-first: the heaviest shard exceeds the mean by at most the longest case.
        assert max(loads) <= sum(loads) / count + max(split.estimates.values()) + 1e-6


@given(data=st.data(), cases=st.lists(NAME, unique=True, min_size=2, max_size=30))
def test_recorded_durations_are_used_where_known_and_the_median_elsewhere(data, cases):
    durations = data.draw(recorded(cases))
    split = plan(cases, 3, durations)
    known = [durations[c] for c in cases if c in durations]
    assert split.known == len(known)
    for case in cases:
        expected = durations[case] if case in durations else (statistics.median(known) if known else UNKNOWN_S)
        assert split.estimates[case] == expected


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
