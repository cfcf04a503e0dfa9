"""The live app-server client, the replay session and the claim tests' stand-in are one kind of session.

The adapter is written against :class:`peerwire.codex.app_server.AppServerSession`;
each implementation must offer every method of it with the same parameters (names,
kinds, which have defaults), so a recorded or scripted session can never drift
from the live one unnoticed.
"""

from __future__ import annotations

import inspect

import pytest

from harness.lab.recorded.replay import ReplaySession
from peerwire.codex.app_server import AppServerClient, AppServerSession
from peerwire.stdio_peer import PeerSession
from tests.core.test_claims import ScriptedAppServer

METHODS = sorted({name for protocol in (AppServerSession, PeerSession) for name, member in vars(protocol).items()
                  if callable(member) and not name.startswith("_")})
"""Its own requests and what every peer's session offers (:class:`peerwire.stdio_peer.PeerSession`)."""


def shape(function) -> list[tuple[str, object, bool]]:
    return [(p.name, p.kind, p.default is inspect.Parameter.empty)
            for p in inspect.signature(function).parameters.values() if p.name != "self"]


def test_the_protocol_names_what_the_adapter_calls():
    assert {"thread_fork", "thread_read", "turn_start", "turn_steer", "thread_inject_items", "close",
            "notifications"} <= set(METHODS)


@pytest.mark.parametrize("session", [AppServerClient, ReplaySession, ScriptedAppServer], ids=lambda c: c.__name__)
@pytest.mark.parametrize("method", METHODS)
def test_every_session_offers_each_method_with_the_same_parameters(session, method):
    offered = getattr(session, method, None)
    assert offered is not None, f"{session.__name__} has no {method}"
    assert shape(offered) == shape(getattr(AppServerSession, method))
