"""Judgements over an attached TUI (mode ``attached_tui``): the thread it started is the one delivered to, and
the exchange is on its screen.

The screens are the TUIs' last ``capture-pane`` text (``tui/<agent>.screen.txt``,
:meth:`~..observations.Observations.screen`); the thread facts come from the
owner's app-server transcript.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..observations import Observations, ScreenLine
from .kernel import Evidence, judgements, require
from .readings import reply_of

DELIVERIES = ("turn/start", "turn/steer", "thread/inject_items")


def _shown(screen: list[ScreenLine], text: str) -> list[ScreenLine]:
    """The screen lines showing ``text``'s first non-empty line (a TUI wraps and indents what it renders,
    so only a line's own text is looked for, never the whole body at once)."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return [line for line in screen if first and first in line.text]


def tui_thread_adopted(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The owner observed the thread the agent's TUI started (``thread/started``), opened none of its own,
    subscribed to it (``thread/resume``) before any delivery, and that is the agent's thread."""
    agent = params["agent"]
    transcript = obs.transcript(agent)
    started = [line for line in transcript if line.dir == "received" and line.method == "thread/started"]
    require(started, f"{agent}'s owner observed no thread/started from its TUI")
    thread = (started[0].params.get("thread") or {}).get("id")
    require(thread in obs.threads(agent), f"the TUI's thread {thread} is not {agent}'s thread {obs.threads(agent)}")
    resumes = [line for line in transcript if line.dir == "sent" and line.method == "thread/resume"
               and line.params.get("threadId") == thread]
    ev.cite(started[0], *resumes[:1])
    require(resumes, f"the owner never subscribed to the TUI's thread {thread}")
    opened = [line for line in transcript if line.dir == "sent" and line.method == "thread/start"]
    require(not opened, f"the owner opened a thread of its own ({opened[0].ref})" if opened else "")
    deliveries = [line for line in transcript if line.dir == "sent" and line.method in DELIVERIES]
    ev.cite(*deliveries[:1])
    early = [d for d in deliveries if transcript.index(d) < transcript.index(resumes[0])]
    require(not early, f"{early[0].method} ({early[0].ref}) was sent before the owner subscribed to the TUI's "
                       f"thread" if early else "")
    elsewhere = [d for d in deliveries if d.params.get("threadId") != thread]
    require(not elsewhere, f"{elsewhere[0].method} went to thread {elsewhere[0].params.get('threadId')}, not the "
                           f"TUI's {thread}" if elsewhere else "")
    return (f"{agent}'s TUI started thread {thread}; the owner observed it, subscribed to it and only then "
            f"delivered ({len(deliveries)} deliveries, all into that thread)")


def tui_shows_exchange(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The agent's TUI screen shows the task's peer text and the agent's answer to it. The text got there as
    the owner's turn input: the runner never types into a composer (:mod:`harness.codex.tui` issues no
    ``send-keys``)."""
    task = obs.select(params["record"])
    agent = params["agent"]
    reply = reply_of(obs, task)
    ev.cite(task["record_id"], reply["record_id"])
    screen = obs.screen(agent)
    asked, answered = _shown(screen, task["body"]), _shown(screen, reply["body"])
    ev.cite(*asked[:1], *answered[:1])
    require(asked, f"{agent}'s TUI screen does not show the task's text {task['body'][:80]!r}")
    require(answered, f"{agent}'s TUI screen does not show its answer {reply['body'][:80]!r}")
    return f"{agent}'s TUI screen shows the task ({asked[0].text.strip()!r}) and the answer ({answered[0].text.strip()!r})"


JUDGEMENTS = judgements(tui_thread_adopted, tui_shows_exchange)
