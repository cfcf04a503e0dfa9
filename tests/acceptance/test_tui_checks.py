"""The attached-TUI judgements over a written artifacts folder: both terminals on their owned sessions, each
screen showing its side of the exchange, and the ways either can fail.

The screens follow what the pinned Codex's TUI draws (0.171.0): ``›`` before an input and in the composer,
``•`` before an answer or a tool call (``Called peerwire.followup_task``), the status line ending with the
thread's name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.acceptance.checks import CheckSpec, judge
from harness.acceptance.observations import Observations, RunnerView
from tests.evidence.exchange import A_ID, ANSWER, B_ID, FINAL_A, PROMPT_A, TASK_BODY, THREAD_A, THREAD_B, task_exchange

TASK = {"kind": "task", "sender": "A", "recipient": "B"}


def transcript(thread: str, name: str, *, more_threads: tuple[str, ...] = ()) -> list[dict]:
    """An owner that adopted its TUI's thread: observed it, named it, subscribed, then delivered into it."""
    lines = [{"dir": "received", "message": {"method": "thread/started", "params": {"thread": {"id": thread}}}},
             {"dir": "sent", "message": {"id": 3, "method": "thread/name/set",
                                         "params": {"threadId": thread, "name": name}}},
             {"dir": "sent", "message": {"id": 4, "method": "thread/resume", "params": {"threadId": thread}}},
             {"dir": "sent", "message": {"id": 5, "method": "turn/start", "params": {"threadId": thread}}}]
    lines += [{"dir": "received", "message": {"method": "thread/started", "params": {"thread": {"id": other}}}}
              for other in more_threads]
    return [{"seq": n, **line} for n, line in enumerate(lines)]


def screen(*body: str, name: str) -> str:
    return "\n".join(["  >_ OpenAI Codex (v0.171.0)", "", *body, "", "› Ask Codex to do anything",
                      f"  peerwire-scripted low · /runs/x/agents/{name}/workspace · {name}",
                      "  ← for agents · ? for shortcuts", ""])


SCREENS = {
    "A": screen(f"› {PROMPT_A.splitlines()[0]}", "• Called peerwire.followup_task", '  └ {"interaction_id": "ix"}',
                "• Called peerwire.wait_agent", f"• {FINAL_A}", name="A"),
    "B": screen("› Message Type: NEW_TASK", f"  Payload:{TASK_BODY}", f"• {ANSWER}", name="B"),
}


def artifacts(tmp_path: Path, *, screens: dict[str, str] | None = None, alive: bool = True,
              more_threads: tuple[str, ...] = ()) -> Observations:
    folder = task_exchange().write(tmp_path / "run")
    for name, thread in (("A", THREAD_A), ("B", THREAD_B)):
        lines = transcript(thread, name, more_threads=more_threads if name == "B" else ())
        (folder / "appserver" / f"{name}.g1.appserver.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        (folder / "tui").mkdir(exist_ok=True)
        (folder / "tui" / f"{name}.screen.txt").write_text((screens or SCREENS)[name], encoding="utf-8")
        (folder / "tui" / f"{name}.pane.json").write_text(json.dumps(
            {"agent": name, "alive": alive or name == "A", "exit_status": None if alive or name == "A" else 1}),
            encoding="utf-8")
    view = RunnerView(agents={"A": A_ID, "B": B_ID}, mode="attached_tui",
                      attachments=[{"agent": "A", "generation": 1, "thread_id": THREAD_A, "pid": 1, "resume": False},
                                   {"agent": "B", "generation": 1, "thread_id": THREAD_B, "pid": 2, "resume": False}])
    return Observations.load(folder, view)


def verdict(obs: Observations, check: str, **params):
    return judge(CheckSpec(check, check, params), obs)


def test_both_terminals_are_judged_on_their_session_and_their_side_of_the_exchange(tmp_path: Path) -> None:
    obs = artifacts(tmp_path)
    for agent in ("A", "B"):
        adopted = verdict(obs, "tui_thread_adopted", agent=agent)
        assert adopted.passed, adopted.summary
        stays = verdict(obs, "tui_stays_on_session", agent=agent)
        assert stays.passed and f"naming the session '{agent}'" in stays.summary, stays.summary
        status_line = next(n for n, line in enumerate(SCREENS[agent].split("\n"), 1) if line.endswith(f"· {agent}"))
        assert stays.evidence.screen == [f"tui/{agent}.pane.json:1", f"tui/{agent}.screen.txt:{status_line}"]
    requester = verdict(obs, "tui_shows_exchange", record=TASK, agent="A")
    assert requester.passed and "the assigned" in requester.summary and "the answer" in requester.summary
    recipient = verdict(obs, "tui_shows_exchange", record=TASK, agent="B")
    assert recipient.passed and "the task" in recipient.summary, recipient.summary


def test_a_terminal_that_left_its_session_fails(tmp_path: Path) -> None:
    exited = verdict(artifacts(tmp_path / "exited", alive=False), "tui_stays_on_session", agent="B")
    assert not exited.passed and "was not running when the run ended" in exited.summary
    switched = verdict(artifacts(tmp_path / "new", more_threads=("01a2-thread-other",)), "tui_stays_on_session",
                       agent="B")
    assert not switched.passed and "started 2 threads" in switched.summary
    elsewhere = {**SCREENS, "B": SCREENS["B"].replace("workspace · B", "workspace · review-2")}
    renamed = verdict(artifacts(tmp_path / "other", screens=elsewhere), "tui_stays_on_session", agent="B")
    assert not renamed.passed and "does not name its session 'B'" in renamed.summary


@pytest.mark.parametrize("agent, screens, missing", [
    # the requester's screen lacks the reply it took in
    ("A", {**SCREENS, "A": SCREENS["A"].replace(f"• {FINAL_A}", "• done")}, "does not show the answer"),
    # the answer shows only before the assignment: not the exchange in order
    ("A", {**SCREENS, "A": screen(f"• {FINAL_A}", "• Called peerwire.followup_task", name="A")},
     "does not show the answer ('42') after the assigned"),
    # the recipient's screen lacks the task
    ("B", {**SCREENS, "B": screen(f"• {ANSWER}", name="B")}, "does not show the task"),
])
def test_a_screen_without_its_side_of_the_exchange_fails(tmp_path: Path, agent, screens, missing) -> None:
    shown = verdict(artifacts(tmp_path, screens=screens), "tui_shows_exchange", record=TASK, agent=agent)
    assert not shown.passed and missing in shown.summary, shown.summary


def test_a_screen_asked_for_the_interrupt_mark_must_show_it(tmp_path: Path) -> None:
    interrupted = screen("› Message Type: NEW_TASK", f"  Payload:{TASK_BODY}",
                         "■ Conversation interrupted - use /feedback if something went wrong", name="B")
    obs = artifacts(tmp_path / "yes", screens={**SCREENS, "B": interrupted})
    assert verdict(obs, "tui_shows_exchange", record=TASK, agent="B", shows=["task", "interrupted"]).passed
    plain = verdict(artifacts(tmp_path / "no"), "tui_shows_exchange", record=TASK, agent="B",
                    shows=["task", "interrupted"])
    assert not plain.passed and "does not show the interrupted" in plain.summary
    unknown = verdict(artifacts(tmp_path / "odd"), "tui_shows_exchange", record=TASK, agent="B", shows=["smile"])
    assert not unknown.passed and "unknown ['smile']" in unknown.summary
