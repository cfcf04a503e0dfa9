"""What a contract run prints for a person: one line per failing requirement, nothing of the suite's insides.

By default the runner asks pytest for a progress line and no header, tracebacks or short summary
(:func:`quiet_options`); the plugin then prints, per failing requirement, :func:`failure_line`: its
level and id, its rule in a few words, what was expected, and an excerpt of what came back, cut
at a JSON value boundary (:func:`json_excerpt`), never in the middle of one. Texts that come
from the suite's own code are scrubbed of object addresses and installation paths (:func:`scrub`).
``-v`` or ``--tb`` gives pytest's own output back.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from .compliance import RequirementVerdict
from .verdicts import Vote

RULE_WORDS = 60
"""How many characters of a requirement's sentence a failure line quotes."""
EXCERPT_CHARS = 160
DETAIL_CHARS = 220
LINE_CHARS = 400

_ADDRESS = re.compile(r"<([^<>]*?) at 0x[0-9a-fA-F]+>")
_INTROSPECTION = re.compile(r"\n(?:assert|[ +]+where) [^\n]*")
_INSTALLED = re.compile(r"(?:[^\s'\"()]*/)?(?:site|dist)-packages/")


def quiet_options(verbosity: int, tb: str | None) -> list[str]:
    """pytest's options for the runner's terminal: quiet by default; ``-v`` (``verbosity``) or ``--tb`` restore
    pytest's header, tracebacks and summaries."""
    if verbosity > 0 or tb:
        return ["-v"] * verbosity + ["--tb", tb or "auto"]
    return ["-q", "--no-header", "--tb=no", "-rN", "--disable-warnings"]


def scrub(text: str) -> str:
    """``text`` without object addresses (``<built-in method get of dict object>``) or paths into an
    installation's ``site-packages``."""
    return _INSTALLED.sub("", _ADDRESS.sub(r"<\1>", text))


def few_words(sentence: str, limit: int = RULE_WORDS) -> str:
    """The start of ``sentence``, cut at a word boundary."""
    flat = " ".join(sentence.split())
    if len(flat) <= limit:
        return flat.rstrip(".")
    cut = flat[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"


def json_excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """``value`` as compact JSON in at most about ``limit`` characters, shortened only at value boundaries: a
    long string keeps its start and its quotes (``"abc…"``), a long object or array its first members and
    ``…``. Never a cut in the middle of a number, a key or an escape."""
    return _render(value, max(limit, 8))


def _render(value: Any, budget: int) -> str:
    full = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(full) <= budget:
        return full
    if isinstance(value, str):
        keep = value[:max(1, budget - 3)]
        while len(json.dumps(keep, ensure_ascii=False)) > budget - 1 and len(keep) > 1:
            keep = keep[:-1]
        return json.dumps(keep, ensure_ascii=False)[:-1] + '…"'
    if isinstance(value, dict):
        return _members([(json.dumps(k, ensure_ascii=False) + ":", v) for k, v in value.items()], budget, "{}")
    if isinstance(value, list):
        return _members([("", v) for v in value], budget, "[]")
    return full  # a number, true, false or null: whole or not at all


def _members(members: list[tuple[str, Any]], budget: int, brackets: str) -> str:
    parts: list[str] = []
    used = 2
    for prefix, member in members:
        room = budget - used - len(prefix) - (1 if parts else 0) - 2  # the separator, and "…" after it
        if room < 6:
            parts.append("…")
            break
        piece = prefix + _render(member, room)
        parts.append(piece)
        used += len(piece) + (1 if len(parts) > 1 else 0)
    return brackets[0] + ",".join(parts) + brackets[1]


def _is_fence(line: str) -> bool:
    try:
        message = json.loads(line)
    except ValueError:
        return False
    return isinstance(message, dict) and isinstance(message.get("id"), str) and message["id"].startswith("fence-")


def excerpt(vote: Vote) -> str | None:
    """What came back, from a failed vote: its response, else the last line received after the last one sent;
    None when nothing came back."""
    if vote.response is not None:
        return json_excerpt(vote.response)
    # The suite's own fence pings (and their answers) answer nothing of the server's: leave them out.
    exchange = [entry for entry in vote.exchange or [] if not _is_fence(str(entry.get("line", "")))]
    sent = [index for index, entry in enumerate(exchange) if entry.get("dir") == "sent"]
    # Only what came back after the last line sent answers it; an earlier line (the handshake's) would mislead.
    received = [entry for entry in exchange[(sent[-1] + 1 if sent else 0):] if entry.get("dir") == "received"]
    if received:
        return line_excerpt(str(received[-1].get("line", "")))
    return None


def line_excerpt(line: str, limit: int = EXCERPT_CHARS) -> str:
    """A line the server wrote: as JSON when it is JSON; else (not JSON, or already clipped) its text, cut after
    the last complete value that fits (a ``,`` that ends one), never inside one."""
    try:
        return json_excerpt(json.loads(line), limit)
    except ValueError:
        pass
    if len(line) <= limit:
        return line
    head = line[:limit]
    cut = head.rfind(",")
    return (head[:cut] if cut > 0 else head) + "…"


def _plain(detail: str) -> str:
    """A failed test's message without pytest's additions: the exception's name, the rewritten assert."""
    for prefix in ("AssertionError: ", "Failed: "):
        detail = detail.removeprefix(prefix)
    return _INTROSPECTION.sub("", detail)  # pytest's rewriting of the assert: the message says it in words


def failure_line(verdict: RequirementVerdict) -> str:
    """One line for a failing requirement: ``FAIL MUST id (its rule in a few words): expected …; got …``."""
    requirement = verdict.requirement
    vote = verdict.failures[0]
    came = excerpt(vote)
    detail = _plain(vote.detail or "")
    if came is not None:
        detail = detail.split("; got ", 1)[0]  # the test's own rendering of what came back: the excerpt says it
    found = few_words(scrub(detail), DETAIL_CHARS)
    text = f"FAIL {requirement.level.name} {requirement.id} ({few_words(requirement.behaviour)}): " \
           f"expected {scrub(vote.check)}"
    if found and vote.check == "the test passes":
        text = f"FAIL {requirement.level.name} {requirement.id} ({few_words(requirement.behaviour)}): {found}"
    elif found:
        text += f"; found {found}"
    if came:
        text += f"; got {came}"
    if len(verdict.failures) > 1:
        text += f" (and {len(verdict.failures) - 1} more failure{'s' if len(verdict.failures) > 2 else ''})"
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 1] + "…"


def baseline_text(verdicts: Sequence[RequirementVerdict], *, target: str, interrupted: str | None = None) -> str:
    """A baseline (the ``--baseline`` format) holding every selected requirement that failed, each with why: the
    comment it was baselined with, or its first failure in a few words; for ``--write-baseline``."""
    lines = [f"# Expected failures of {target}, written by --write-baseline from a run's failures.",
             "# One requirement a line, then why after '#'. Edit the reasons; run with --baseline FILE.",
             *([f"# The run was interrupted by {interrupted}: only what ran is here."] if interrupted else [])]
    failing = [v for v in verdicts if v.selected and v.failures and v.result.value in ("fail", "expected failure")]
    width = max((len(v.requirement.id) for v in failing), default=0)
    for verdict in failing:
        vote = verdict.failures[0]
        detail = _plain(vote.detail or "")
        found = detail if vote.check == "the test passes" and detail else \
            (f"expected {vote.check}; found {detail}" if detail else f"expected {vote.check}")
        why = verdict.baselined or few_words(scrub(found), 120)
        lines.append(f"{verdict.requirement.id:<{width}}  # {why}")
    return "\n".join(lines) + "\n"


def failure_lines(verdicts: Sequence[RequirementVerdict]) -> list[str]:
    """A line for every selected requirement that failed (an expected failure included, marked)."""
    lines = []
    for verdict in verdicts:
        if verdict.selected and verdict.failures and verdict.result.value in ("fail", "expected failure"):
            line = failure_line(verdict)
            lines.append(line.replace("FAIL ", "FAIL (baselined) ", 1) if verdict.result.value != "fail" else line)
    return lines
