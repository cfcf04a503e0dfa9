"""Judgements over attached TUIs (mode ``attached_tui``): each agent's terminal is on the thread its owner delivers
into, stays on that session, and shows the exchange.

The screens are the TUIs' last ``capture-pane`` text (``tui/<agent>.screen.txt``,
:meth:`~..observations.Observations.screen`) and whether each TUI was still
running then (``tui/<agent>.pane.json``); the thread facts come from the
owner's app-server transcript.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.codex.tui import INTERRUPTED

from ..observations import Observations, ScreenLine
from .kernel import Evidence, Failed, judgements, require
from .readings import reply_of

DELIVERIES = ("turn/start", "turn/steer", "thread/inject_items")
COMPOSER = "›"
"""How the pinned Codex's TUI marks a user input and its composer (0.171.0)."""
SHOWS = ("task", "answer", "assigned", "interrupted")
"""What a screen can be asked to show of a task (see :func:`tui_shows_exchange`)."""


def _shown(screen: list[ScreenLine], text: str) -> list[ScreenLine]:
    """The screen lines showing ``text``'s first non-empty line (a TUI wraps and indents what it renders,
    so only a line's own text is looked for, never the whole body at once)."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return [line for line in screen if first and first in line.text]


def _started(obs: Observations, agent: str) -> list[str]:
    """The threads whose start the agent's owner observed (``thread/started``), in order."""
    return [(line.params.get("thread") or {}).get("id") for line in obs.transcript(agent)
            if line.dir == "received" and line.method == "thread/started"]


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


def tui_stays_on_session(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The agent's terminal stayed on its owned session to the end: its TUI was still running when the run ended,
    it started no thread but the one its owner adopted, and its status line names that thread as the owner named
    it (``thread/name/set``)."""
    agent = params["agent"]
    pane = obs.pane(agent)
    ev.cite(pane)
    state = json.loads(pane.text)
    require(state.get("alive") is True, f"{agent}'s TUI was not running when the run ended ({pane.text})")
    started = _started(obs, agent)
    require(started, f"{agent}'s owner observed no thread/started from its TUI")
    require(set(started) == {started[0]}, f"{agent}'s TUI started {len(set(started))} threads ({started}), not "
                                          f"only the owned {started[0]}")
    thread = started[0]
    named = [line for line in obs.transcript(agent) if line.dir == "sent" and line.method == "thread/name/set"
             and line.params.get("threadId") == thread]
    require(named, f"the owner never named {agent}'s thread {thread}")
    name = str(named[-1].params.get("name"))
    screen = obs.screen(agent)
    composers = [i for i, line in enumerate(screen) if line.text.lstrip().startswith(COMPOSER)]
    footer = screen[composers[-1] + 1:] if composers else []
    status = [line for line in footer if line.text.rstrip().endswith(f"· {name}")]
    ev.cite(named[-1], *status[:1])
    require(status, f"{agent}'s TUI status line does not name its session {name!r} (thread {thread}): "
                    f"{' | '.join(line.text.strip() for line in footer if line.text.strip())[:300]!r}")
    return (f"{agent}'s TUI was still running at the end, on thread {thread} alone, its status line naming the "
            f"session {name!r} ({status[0].text.strip()[-80:]!r})")


def tui_shows_exchange(obs: Observations, params: Mapping[str, Any], ev: Evidence) -> str:
    """The agent's TUI screen shows its side of the task, in order. The recipient's shows the task's peer text
    (``task``) and its answer (``answer``); the requester's the call that assigned it (``assigned``) and the reply
    it took in (``answer``); ``shows`` names others, such as ``interrupted`` (the TUI's mark of a turn ended
    interrupted). The text got there as turn input and output: the runner never types into a composer
    (:mod:`harness.codex.tui` issues no ``send-keys``)."""
    task = obs.select(params["record"])
    agent = params["agent"]
    ev.cite(task["record_id"])
    recipient = obs.agent_name(task["recipient"]["agent_id"])
    requester = obs.agent_name(task["sender"]["agent_id"]) if task["sender"].get("agent_id") else None
    require(agent in (recipient, requester), f"{agent} neither sent nor received {task['record_id']}")
    shows = list(params.get("shows") or (("task", "answer") if agent == recipient else ("assigned", "answer")))
    unknown = [what for what in shows if what not in SHOWS]
    if unknown:
        raise Failed(f"shows: unknown {unknown} (known: {', '.join(SHOWS)})")
    screen = obs.screen(agent)
    texts = {"task": task["body"], "interrupted": INTERRUPTED,
             "assigned": f"{_server(obs, task)}.followup_task"}
    if "answer" in shows:
        reply = reply_of(obs, task)
        ev.cite(reply["record_id"])
        texts["answer"] = reply["body"]
    found: list[tuple[str, ScreenLine]] = []
    after = -1
    for what in shows:
        lines = [line for line in _shown(screen, texts[what]) if screen.index(line) > after]
        require(lines, f"{agent}'s TUI screen does not show the {what} ({texts[what][:80]!r})"
                       + (f" after the {found[-1][0]}" if found else ""))
        found.append((what, lines[0]))
        after = screen.index(lines[0])
    ev.cite(*(line for _, line in found))
    return f"{agent}'s TUI screen shows, in order, " + "; ".join(f"the {what} ({line.text.strip()[:60]!r})"
                                                                  for what, line in found)


def _server(obs: Observations, task: Mapping[str, Any]) -> str:
    """The MCP server name a TUI shows a tool call under (``peerwire.followup_task``): the namespace the requester's
    call came through, without Codex's ``mcp__`` prefix."""
    for call, _ in obs.tool_calls(obs.agent_name(task["sender"]["agent_id"]), "followup_task"):
        if call.payload.get("call_id") == (task.get("tool_receipt") or {}).get("call_id"):
            return str(call.payload.get("namespace") or "mcp__peerwire").removeprefix("mcp__")
    return "peerwire"


JUDGEMENTS = judgements(tui_thread_adopted, tui_stays_on_session, tui_shows_exchange)
