"""Live labs: a core under test, the scripted model and attached Codex agents brought up together.

* :mod:`.driver` — what the acceptance runner needs from a core (the driver interface);
* :mod:`.reference` — the driver of peerwire's reference core;
* :mod:`.live` — the lab as subprocesses (the core's app, each agent's app-server);
* :mod:`.inprocess` — the reference's Codex adapter inside one event loop;
* :mod:`.recorded` — the adapter's delivery routes driven live, and their recordings replayed.
"""
