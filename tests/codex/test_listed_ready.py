"""What an owner that subscribes late (an attached TUI's thread) learns from ``mcpServerStatus/list``.

The startup notifications of a thread another client started went to that
client only; the owner asks for the servers' states instead. Live, the adopting
owner of tests/codex/test_attached_tui.py does this against the real Codex.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from peerwire.codex.app_server import AppServerError
from peerwire.codex.readiness import listed_ready
from peerwire.errors import Code, PeerwireError
from tests.patience import WAIT_S


class Listing:
    """Answers ``mcp_server_status`` with ``answer`` (or raises it)."""

    def __init__(self, answer: dict[str, Any] | Exception):
        self.answer = answer
        self.asked: list[str] = []

    async def mcp_server_status(self, thread_id: str, *, timeout: float) -> dict[str, Any]:
        self.asked.append(thread_id)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def listed(*entries: tuple[str, str | None]) -> dict[str, Any]:
    return {"data": [{"name": name, "runtimeStatus": status} for name, status in entries]}


def ready(session: Listing, names: list[str]) -> list[str]:
    return asyncio.run(listed_ready(session, "th-1", names, timeout=WAIT_S))  # type: ignore[arg-type]


def test_only_servers_listed_connected_count_as_ready() -> None:
    session = Listing(listed(("peerwire", "connected"), ("other", "starting"), ("unasked", "connected")))
    assert ready(session, ["peerwire", "other", "missing"]) == ["peerwire"]
    assert session.asked == ["th-1"]
    # a status the list does not know yet (null) leaves the server to its notifications
    assert ready(Listing(listed(("peerwire", None))), ["peerwire"]) == []


@pytest.mark.parametrize("status", ["failed", "cancelled"])
def test_a_server_listed_as_failed_fails_the_adoption_naming_it(status: str) -> None:
    with pytest.raises(PeerwireError, match=rf"'peerwire' \({status}\)") as refused:
        ready(Listing(listed(("peerwire", status), ("other", "connected"))), ["peerwire", "other"])
    assert refused.value.code is Code.APP_UNAVAILABLE


@pytest.mark.parametrize("error", [AppServerError("no such method"), TimeoutError()])
def test_a_list_codex_refuses_or_never_answers_leaves_everything_to_the_notifications(error: Exception) -> None:
    assert ready(Listing(error), ["peerwire"]) == []
    assert ready(Listing({"data": "not a list"}), ["peerwire"]) == []
