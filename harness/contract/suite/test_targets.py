"""Targets are exact: a name or an alias in other letter case is nobody.

An implementation that matches names case-insensitively (a store collation, a
``lower()`` on both sides) delivers ``reviewer`` to ``ReViewer``: a message
meant for one agent reaches another whose name differs only in case. Each
variant below must fail with ``unknown_target`` as information, as a task and
as an interrupt, and leave nothing in the agent's mailbox.
"""

from __future__ import annotations

import secrets

from harness.contract.fixtures import succeed, tool_call
from harness.contract.manifest import requirement


def _variants(text: str) -> list[str]:
    flipped = text[0].swapcase() + text[1:]
    out = [text.lower(), text.upper(), text.swapcase(), text.title(), flipped]
    return list(dict.fromkeys(v for v in out if v != text))


@requirement("target:name:case-exact")
def test_names_and_aliases_in_other_case_are_unknown(servers):
    tag = secrets.token_hex(2)
    name, alias = f"ReViewer-Ab{tag}", f"Lead.Qa{tag}"
    agent = servers.provisioner.register(name, aliases=(alias,))
    sender = servers.start()
    problems = []
    for text in (name, alias):
        for variant in _variants(text):
            for tool, arguments in (("send_message", {"target": variant, "message": f"to {variant}"}),
                                    ("followup_task", {"target": variant, "message": f"task for {variant}"}),
                                    ("interrupt_agent", {"target": variant})):
                outcome = tool_call(sender, tool, arguments)
                code = ((outcome.structured or {}).get("error") or {}).get("code") if outcome.is_error else None
                if code != "unknown_target":
                    problems.append(f"{tool} to {variant!r} (registered: {text!r}): "
                                    f"{outcome.response or outcome.failure}")
    page = succeed(servers.start(agent), "receive_messages", {"limit": 100})
    if page.get("records"):
        problems.append(f"{len(page['records'])} records reached {name!r} through names in another case: "
                        f"{[r.get('body') for r in page['records']][:5]}")
    exact = tool_call(sender, "send_message", {"target": name, "message": "exactly you"})
    assert exact.result is not None and not exact.is_error, f"the exact name must reach it: {exact.response}"
    assert not problems, "names matched in another letter case:\n  " + "\n  ".join(problems[:8])
