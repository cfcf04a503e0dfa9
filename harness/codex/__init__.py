"""Real Codex for the harness: the pinned install, private Codex homes, fixture
workspaces, and the labs that bring a core and attached Codex agents up together
(:mod:`.lab` as subprocesses, :mod:`.inprocess` inside one event loop).
:mod:`.recorded` records the adapter's delivery routes into fixtures and replays them."""
