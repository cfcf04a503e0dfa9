"""Processes the harness owns: jobs that end everything they start (:mod:`.jobs`),
locked run homes (:mod:`.run_home`) and the core app as a subprocess (:mod:`.app`)."""
