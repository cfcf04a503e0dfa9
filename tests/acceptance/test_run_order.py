"""The order an acceptance run starts its scenario runs in: the longest first, by recorded durations, so no
long run starts last and alone; results stay in the order of the selection."""

from __future__ import annotations

from harness.acceptance.run import longest_first
from harness.acceptance.scenario import PairChoice, discover, select
from harness.shards import load_durations


def test_runs_start_longest_first_and_unknown_durations_count_as_longest() -> None:
    selection = select(discover(), pairs=[PairChoice(), PairChoice(("codex", "opencode"), ("task-reply-auto",))])
    runs = [(scenario, mode, None, None) for scenario, mode in selection.runs]
    keys = [scenario.key(mode) for scenario, mode, _, _ in runs]
    durations = {key: float(n) for n, key in enumerate(keys) if "opencode" not in key}
    order = longest_first(runs, durations)

    assert sorted(order) == list(range(len(runs)))
    started = [keys[i] for i in order]
    assert "opencode" in started[0], "a pair with no recorded duration goes first"
    known = [durations[key] for key in started[1:]]
    assert known == sorted(known, reverse=True)


def test_with_no_durations_the_runs_start_as_selected() -> None:
    runs = [(scenario, mode, None, None) for scenario, mode in select(discover()).runs]
    assert longest_first(runs, {}) == list(range(len(runs)))
    assert load_durations(None, "acceptance"), "the repository records the acceptance runs' durations"
