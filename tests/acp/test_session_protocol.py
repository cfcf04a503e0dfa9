"""The live ACP client and the recorded replay are one kind of session, as the app-server's are
(``tests/codex/test_session_protocol.py``): the ACP adapter is written against
:class:`peerwire.acp.client.AcpSession`, so a replay can never drift from the live client unnoticed."""

from __future__ import annotations

import pytest

from peerwire.acp.client import AcpClient, AcpSession
from peerwire.stdio_peer import PeerSession
from tests.acp.replay import ReplaySession
from tests.codex.test_session_protocol import shape

METHODS = sorted({name for protocol in (AcpSession, PeerSession) for name, member in vars(protocol).items()
                  if callable(member) and not name.startswith("_")})


def test_the_protocol_names_what_the_adapter_calls():
    assert {"session_new", "session_load", "session_prompt", "session_cancel", "close", "notifications"} <= set(METHODS)


@pytest.mark.parametrize("session", [AcpClient, ReplaySession], ids=lambda c: c.__name__)
@pytest.mark.parametrize("method", METHODS)
def test_every_session_offers_each_method_with_the_same_parameters(session, method):
    offered = getattr(session, method, None)
    assert offered is not None, f"{session.__name__} has no {method}"
    assert shape(offered) == shape(getattr(AcpSession, method))
