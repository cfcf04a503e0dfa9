"""``mcp serve`` stops reading when its answers are not read: memory stays bounded.

A client pipelines requests and never reads stdout. The server may hold
:data:`~peerwire.limits.OUTPUT_HIGH_WATER_BYTES` of unread answers and
:data:`~peerwire.limits.MAX_CALLS_IN_FLIGHT` calls; past that it reads no
more, the pipes fill and the client's writes block. Its resident memory stays
within :data:`RSS_BOUND_MB` of what it was before the flood (measured on a
real process), and once the client reads again every request is answered,
in order of arrival for the answers given at once.
"""

from __future__ import annotations

import json
import os
import sys


from harness.contract.unread_flood import flood, tools_list
from peerwire.home import HOME_ENV, SESSION_ENV

REQUESTS = 20_000
RSS_BOUND_MB = 40  # the bound under test
"""How much the server's RSS may grow under the flood: the unread answers' bound (1 MiB), the calls in flight,
the pipes' and the interpreter's own slack. Without backpressure 20,000 unread tools/list reach 500 MB."""
SERVER = [sys.executable, "-m", "peerwire", "mcp", "serve"]


def test_unread_answers_stop_the_reading_and_memory_stays_bounded():
    env = {k: v for k, v in os.environ.items() if k not in (HOME_ENV, SESSION_ENV)}
    figures = flood(SERVER, env, tools_list(REQUESTS), give_up_mb=10 * RSS_BOUND_MB)
    assert figures.reading_stopped, f"the server read everything it was sent unanswered: {figures}"
    assert figures.growth_mb < RSS_BOUND_MB, figures
    assert figures.answered == REQUESTS, f"answers lost once the client read again: {figures}"


def test_pipelined_tool_calls_are_held_to_the_calls_in_flight(core):
    alice = core.register("alice")
    for n in range(40):  # each answer lists them all: several KB an answer
        core.register(f"peer-{n:02d}-" + "x" * 40)
    requests = [json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                            "params": {"name": "list_agents", "arguments": {}}}).encode() + b"\n"
                for n in range(10_000)]
    env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: alice.token}
    figures = flood(SERVER, env, requests, give_up_mb=10 * RSS_BOUND_MB)
    assert figures.growth_mb < RSS_BOUND_MB, figures
    assert figures.answered == len(requests), figures
