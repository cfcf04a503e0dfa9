"""Which kind of agent the lab starts under each name: Codex, OpenCode, or any ACP agent the user names.

A scenario's agents are started as a *pair* of kinds (``runner.py --agents
A_KIND,B_KIND``; default ``codex,codex``): ``codex`` (``codex app-server``, the
Codex adapter), ``opencode`` (``opencode acp`` in a private home on the run's
model, the ACP adapter), or ``acp:NAME``, an ACP agent the user installed and
named with ``--acp-agent NAME=COMMAND`` (the ACP adapter, the user's own
environment and provider). What each kind can do is the capability table,
:mod:`harness.capabilities` (``contracts/capabilities.json``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.capabilities import ACP_PREFIX, agent_kind

CODEX = "codex"
OPENCODE = "opencode"
DEFAULT_PAIR = (CODEX, CODEX)
"""The pair every scenario runs as unless told otherwise; its runs keep the identity they had before pairs."""


class KindError(ValueError):
    """An ``--agents`` or ``--acp-agent`` value that names no agent the lab can start."""


@dataclass(frozen=True)
class AgentSpec:
    """How the lab starts one agent: its kind and, for ``acp:NAME``, the user's ACP command."""

    kind: str
    command: tuple[str, ...] = ()

    @property
    def provider(self) -> str:
        """The core's provider adapter that drives it (``codex`` or ``acp``)."""
        return agent_kind(self.kind).provider

    @property
    def on_run_model(self) -> bool:
        """Whether it talks to the run's model (the scripted model, or the recording proxy), so its model
        requests are logged; an ``acp:NAME`` agent talks to its own provider."""
        return not self.kind.startswith(ACP_PREFIX)


def parse_acp_agent(value: str) -> tuple[str, tuple[str, ...]]:
    """``NAME=COMMAND`` (``--acp-agent``): the name and the command, split as a shell would (no shell runs it)."""
    name, sep, command = value.partition("=")
    name = name.strip()
    if not sep or not name or not command.strip():
        raise KindError(f"--acp-agent {value!r}: give NAME=COMMAND, e.g. myagent='my-agent acp'")
    if not all(ch.isalnum() or ch in "-_." for ch in name):
        raise KindError(f"--acp-agent {value!r}: NAME may hold letters, digits, '-', '_' and '.' only")
    try:
        argv = tuple(shlex.split(command))
    except ValueError as error:
        raise KindError(f"--acp-agent {value!r}: the command does not parse ({error})") from None
    return name, argv


def parse_pair(value: str, acp_agents: Mapping[str, Sequence[str]] | None = None) -> tuple[AgentSpec, AgentSpec]:
    """``A_KIND,B_KIND`` (``--agents``): a spec per agent. ``acp:NAME`` must name an ``--acp-agent``."""
    parts = [part.strip() for part in value.split(",")]
    if len(parts) != 2 or not all(parts):
        raise KindError(f"--agents {value!r}: give two kinds, A's and B's, e.g. codex,opencode")
    return spec(parts[0], acp_agents), spec(parts[1], acp_agents)


def spec(kind: str, acp_agents: Mapping[str, Sequence[str]] | None = None) -> AgentSpec:
    """The spec of one kind name (see :func:`parse_pair`)."""
    acp_agents = acp_agents or {}
    if kind.startswith(ACP_PREFIX):
        name = kind[len(ACP_PREFIX):]
        if name not in acp_agents:
            raise KindError(f"{kind}: no --acp-agent {name}=COMMAND names that agent"
                            + (f" (named: {', '.join(sorted(acp_agents))})" if acp_agents else ""))
        return AgentSpec(kind, tuple(acp_agents[name]))
    try:
        agent_kind(kind)
    except KeyError as error:
        raise KindError(str(error.args[0])) from None
    return AgentSpec(kind)


def pair_name(kinds: Sequence[str]) -> str:
    """The pair as ``--agents`` writes it (``codex,opencode``)."""
    return ",".join(kinds)


def kinds_of(agents: Sequence[str], pair: Sequence[AgentSpec]) -> dict[str, AgentSpec]:
    """Each of a scenario's agents with its spec: the first two take the pair's, in order (A, then B); any
    further agent is Codex."""
    return {name: pair[index] if index < len(pair) else AgentSpec(CODEX) for index, name in enumerate(agents)}
