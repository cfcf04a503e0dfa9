"""A sequence diagram drawn as SVG by the report writer: a picture with no script and no renderer.

The page shows each exchange as a picture that needs nothing but the browser's SVG support:
one column per participant with its lifeline, one row per step, in the order
:class:`~harness.report.sequence.SequenceDiagram` put them. A message is an arrow
(solid for ``->>``, dashed for ``-->>`` answers), a step from a participant to
itself a loop, a note a box over one participant or spanning two. Every label
is escaped XML text, and each step carries its whole text and source as a
``<title>`` (the hover text), so a shortened label loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from .sequence import shorten

COLUMN = 340
"""Pixels between lifelines: room for the longest label (:func:`~.sequence.shorten` caps its length)."""
ROW = 30
HEAD = 34
MARGIN = 20
BOX_WIDTH = 150
CHAR = 6.6
"""Approximate width of one character of the 11 px label font, for boxes around notes."""

STYLE = ("svg.sequence{font:11px ui-monospace,SFMono-Regular,Menlo,monospace;max-width:100%;height:auto}"
         "svg.sequence .who rect{fill:#eef2f7;stroke:#5b6b82}svg.sequence .who text{font-weight:600}"
         "svg.sequence .life{stroke:#9aa5b5;stroke-dasharray:4 4}"
         "svg.sequence .msg line,svg.sequence .msg path{stroke:#243447;fill:none}"
         "svg.sequence .answer line,svg.sequence .answer path{stroke-dasharray:5 3}"
         "svg.sequence .note rect{fill:#fff8d6;stroke:#c9b458}"
         "svg.sequence text{fill:#1d2733}")


def sequence_svg(participants: Sequence[str], steps: Sequence[Mapping[str, Any]], ident: str = "sequence", *,
                 styled: bool = True) -> str:
    """The SVG of ``steps`` (the report's ``sequence`` entries: ``from``, ``to``, ``arrow``, ``text``,
    ``source``) between ``participants``, drawn left to right in that order; a participant a step names
    but the list lacks is added at the right. ``ident`` makes the arrowhead's id unique in the page.
    Without ``styled`` the picture leaves its :data:`STYLE` to the page (which holds it once for all)."""
    head = "pw-" + "".join(c if c.isalnum() else "-" for c in ident) + "-head"
    names = list(dict.fromkeys([*participants, *(name for s in steps for name in (s["from"], s["to"]))]))
    x = {name: MARGIN + BOX_WIDTH / 2 + n * COLUMN for n, name in enumerate(names)}
    width = MARGIN * 2 + BOX_WIDTH + COLUMN * max(len(names) - 1, 0)
    top = MARGIN + HEAD
    bottom = top + ROW * (len(steps) + 1)
    height = bottom + HEAD + MARGIN
    parts = [f'<svg class="sequence" xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {width:.0f} '
             f'{height:.0f}" width="{width:.0f}" height="{height:.0f}" data-steps="{len(steps)}">',
             f"<title>{escape(f'sequence of {len(steps)} steps between ' + ', '.join(names))}</title>",
             f"<style>{STYLE}</style>" if styled else "",
             f'<defs><marker id="{head}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
             'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#243447"/></marker></defs>']
    for name in names:
        parts.append(f'<line class="life" x1="{x[name]:.0f}" y1="{top:.0f}" x2="{x[name]:.0f}" y2="{bottom:.0f}"/>')
        parts += [_box(name, x[name], MARGIN), _box(name, x[name], bottom)]
    for n, step in enumerate(steps):
        parts.append(_step(step, x, top + ROW * (n + 1), width, head))
    parts.append("</svg>")
    return "\n".join(parts)


def _box(name: str, center: float, y: float) -> str:
    return (f'<g class="who"><rect x="{center - BOX_WIDTH / 2:.0f}" y="{y:.0f}" width="{BOX_WIDTH}" height="{HEAD - 8}" '
            f'rx="4"/><text x="{center:.0f}" y="{y + (HEAD - 8) / 2 + 4:.0f}" text-anchor="middle">'
            f"{escape(name)}</text></g>")


def _step(step: Mapping[str, Any], x: Mapping[str, float], y: float, width: float, head: str) -> str:
    whole = " ".join(str(step.get("text", "")).split())
    text = shorten(whole)  # the whole text stays in the step's title
    hover = f"<title>{escape(whole + (' · ' + str(step['source']) if step.get('source') else ''))}</title>"
    start, end = x[step["from"]], x[step["to"]]
    if step["arrow"] == "note":
        left, right = min(start, end), max(start, end)
        half = max(len(text) * CHAR / 2 + 8, (right - left) / 2 + 40)
        half = min(half, width / 2 - 2)
        middle = min(max((left + right) / 2, half + 2), width - half - 2)  # the box stays inside the picture
        return (f'<g class="note">{hover}<rect x="{middle - half:.0f}" y="{y - 14:.0f}" width="{2 * half:.0f}" '
                f'height="20" rx="2"/><text x="{middle:.0f}" y="{y:.0f}" text-anchor="middle">{escape(text)}'
                "</text></g>")
    kind = "msg answer" if step["arrow"].startswith("--") else "msg"
    if start == end:  # to itself: a loop out to the right and back
        return (f'<g class="{kind}">{hover}<path d="M{start:.0f},{y - 6:.0f} h30 v12 h-30" marker-end="url(#{head})"/>'
                f'<text x="{start + 36:.0f}" y="{y + 4:.0f}">{escape(text)}</text></g>')
    return (f'<g class="{kind}">{hover}<line x1="{start:.0f}" y1="{y:.0f}" x2="{end:.0f}" y2="{y:.0f}" marker-end="url(#{head})"/>'
            f'<text x="{(start + end) / 2:.0f}" y="{y - 5:.0f}" text-anchor="middle">{escape(text)}</text></g>')
