"""The diagram renderer report.html embeds: Mermaid from the pinned npm install, and the page's CSP.

``package.json``/``package-lock.json`` pin ``mermaid``; ``npm ci`` (``make setup``)
puts its self-contained browser build at ``node_modules/mermaid/dist/mermaid.min.js``.
A report embeds that file whole, so it renders its sequence diagrams with no
network and no file beside it. The page's Content-Security-Policy allows exactly
the embedded scripts, by their SHA-256, and no remote load of any kind: a viewer
that obeys it cannot make a request that leaves the machine.

Without the install (no ``npm ci``) the report still shows each diagram's Mermaid
source, and says why there is no picture.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "mermaid"
BUNDLE = Path("node_modules") / PACKAGE / "dist" / "mermaid.min.js"

# Started after the page is parsed; marks <body data-diagrams> so a reader (or a test) can tell
# whether every diagram became a picture: "rendered", "failed: <why>" or "unavailable".
START = """(function () {
  var body = document.body;
  if (typeof mermaid === "undefined") { body.dataset.diagrams = "unavailable"; return; }
  mermaid.initialize({startOnLoad: false, securityLevel: "strict", theme: "neutral",
                      sequence: {useMaxWidth: true, wrap: false}});
  mermaid.run({querySelector: "pre.mermaid"}).then(function () {
    var pending = document.querySelectorAll("pre.mermaid:not([data-processed])").length;
    body.dataset.diagrams = pending ? "failed: " + pending + " not processed" : "rendered";
  }, function (error) {
    body.dataset.diagrams = "failed: " + error;
  });
})();"""


@dataclass(frozen=True)
class Renderer:
    """The pinned Mermaid build: its source, version and SHA-256."""

    version: str
    script: str
    sha256: str


@functools.cache
def pinned_renderer(root: Path = PROJECT_ROOT) -> Renderer | None:
    """The installed Mermaid build when it is the version ``package-lock.json`` pins, else ``None``."""
    bundle = root / BUNDLE
    try:
        installed = json.loads((root / "node_modules" / PACKAGE / "package.json").read_text(encoding="utf-8"))
        lock = json.loads((root / "package-lock.json").read_text(encoding="utf-8"))
        script = bundle.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    pinned = (lock.get("packages") or {}).get(f"node_modules/{PACKAGE}", {}).get("version")
    if installed.get("version") != pinned:
        return None
    return Renderer(pinned, script, hashlib.sha256(script.encode("utf-8")).hexdigest())


def script_hash(script: str) -> str:
    """A CSP source expression allowing exactly this inline script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy(scripts: list[str]) -> str:
    """Nothing from anywhere but what the page holds: its own scripts (by hash) and inline styles.

    ``img-src``/``font-src`` allow ``data:`` only (Mermaid may inline them);
    everything else, connections included, is ``'none'``.
    """
    allowed = " ".join(script_hash(s) for s in scripts) or "'none'"
    return (f"default-src 'none'; script-src {allowed}; style-src 'unsafe-inline'; img-src data:; "
            "font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")
