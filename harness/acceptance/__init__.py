"""The acceptance runner: scenarios as data, driven against real Codex agents, judged from evidence.

* :mod:`.scenario` — loading and selecting scenario files;
* :mod:`.steps` — what each step does to the live lab;
* :mod:`.execution` — one scenario run (run home, job, lab, phases, result);
* :mod:`.observations` / :mod:`.checks` — reading the artifacts and judging them
  (a package: the judging kernel, shared readings, the judgements by concern,
  those over a collaboration tree);
* :mod:`.artifacts` — what a scenario's artifacts folder holds;
* :mod:`.run` — a whole run: scenario runs in parallel worker processes, the report;
* :mod:`.options` — the command line of ``runner.py``.
"""
