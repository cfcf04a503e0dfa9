"""What a provider edge proves about a handoff, and the stage it becomes.

The Codex adapter against the real store, its app-server a stand-in whose
``thread/inject_items`` acknowledges, never answers, or refuses: a handoff
proven only as started is its own stage, ``provider_handoff_started_unverified``,
with the provider result's ``degraded`` flag, and never ``provider_visible``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from peerwire.codex.app_server import JsonRpcError
from peerwire.lifecycle import Stage

from .test_claims import Core, ScriptedAppServer, _pair
from tests.patience import WAIT_S


class InjectOutcome(ScriptedAppServer):
    def __init__(self, outcome: BaseException | None):
        super().__init__()
        self.outcome = outcome

    async def thread_inject_items(self, thread_id: str, items: Any, *, timeout: float = 0) -> dict:
        self.sent.append(("thread/inject_items", None))
        if self.outcome is not None:
            raise self.outcome
        return {}


@pytest.mark.parametrize(("outcome", "stage", "state", "degraded"), [
    (None, Stage.PROVIDER_VISIBLE, "provider_visible", False),
    (TimeoutError(), Stage.PROVIDER_HANDOFF_STARTED_UNVERIFIED, "handoff_started_unverified", True),
    (JsonRpcError(-32603, "refused"), Stage.PROVIDER_UNCERTAIN, "uncertain", None),
], ids=["acknowledged", "written-never-acknowledged", "refused"])
def test_a_handoff_is_recorded_as_what_it_proved(tmp_path: Path, outcome, stage, state, degraded):
    db = tmp_path / "peerwire.db"
    _pair(db)

    async def run() -> tuple[list[dict], dict, Any]:
        core = Core(db, InjectOutcome(outcome))
        await core.attach()
        receipt = core.store.mailbox.admit_information(core.agent("A"), core.agent("B"), "for your thread")
        result = await asyncio.wait_for(core.codex.deliver(core.agent("B"), core.store.mailbox.interaction(
            receipt["interaction_id"])), WAIT_S)
        trace = core.store.trace(receipt["interaction_id"])["interactions"][0]
        await core.close()
        return trace["stages"], trace, result

    stages, trace, result = asyncio.run(run())
    handoff = [s for s in stages if s["stage"] not in (Stage.ENTERED, Stage.ADMITTED)]
    assert [s["stage"] for s in handoff] == [stage] and trace["state"] == state
    assert result.provider == "codex" and result.method == "thread/inject_items"
    if degraded is not None:
        assert result.accepted is True and result.degraded is degraded
        assert handoff[0]["detail"]["degraded"] is degraded
    else:
        assert result.accepted is False and result.error
    if stage is not Stage.PROVIDER_VISIBLE:
        assert not [s for s in stages if s["stage"] == Stage.PROVIDER_VISIBLE], "never recorded as delivered"
