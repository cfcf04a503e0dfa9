"""A scenario's artifacts folder: the name of every file in it, defined once.

::

    core-export.json                         the core's evidence export (contracts/export.schema.json)
    core/app.log                             the core app's log
    model-requests.jsonl                     the model request log: the scripted model's, or the recording proxy's
    appserver/<agent>.g<n>.appserver.jsonl   each owner generation's app-server transcript (and .stderr.log)
    acp/<agent>.g<n>.acp.jsonl               an ACP agent's: each owner generation's ACP transcript (and .stderr.log)
    opencode/<agent>/<file>.log              an OpenCode agent's own log
    rollouts/<agent>/rollout-*.jsonl         the agent's Codex rollouts
    tui/<agent>.screen.txt                   mode attached_tui: the agent's TUI screen at the end, with scroll-back
    tui/<agent>.pane.json                    mode attached_tui: whether that TUI was still running then

The run writes it (:mod:`harness.acceptance.artifacts`, a core's driver for its own
files); the checks (:mod:`harness.acceptance.observations`) and the report read it.
"""

from __future__ import annotations

import re

EXPORT_FILE = "core-export.json"
CORE_LOG = "core/app.log"
MODEL_REQUESTS = "model-requests.jsonl"
APPSERVER_DIR = "appserver"
ROLLOUTS_DIR = "rollouts"
TUI_DIR = "tui"
ACP_DIR = "acp"
OPENCODE_LOG_DIR = "opencode"
TRANSCRIPT = re.compile(r"(?P<agent>.+)\.g(?P<generation>\d+)\.appserver\.jsonl")
"""An app-server transcript's file name: the agent's name, then its owner generation."""
ACP_TRANSCRIPT = re.compile(r"(?P<agent>.+)\.g(?P<generation>\d+)\.acp\.jsonl")
"""An ACP transcript's file name (the core's ACP adapter writes it so): the agent's name, then its generation."""


def transcript_name(agent: str, generation: int) -> str:
    """The file name of ``agent``'s app-server transcript at owner ``generation``."""
    return f"{agent}.g{generation}.appserver.jsonl"


def screen_name(agent: str) -> str:
    """The file name of ``agent``'s TUI screen (``tmux capture-pane`` text) in :data:`TUI_DIR`."""
    return f"{agent}.screen.txt"


def pane_name(agent: str) -> str:
    """The file name of the state of ``agent``'s TUI pane when its screen was kept (JSON) in :data:`TUI_DIR`."""
    return f"{agent}.pane.json"
