#!/usr/bin/env python3
"""peerwire's entry point in a checkout: ``python runner.py [COMMAND] ...``.

The same dispatcher as the installed ``peerwire-harness`` console script
(:mod:`harness.cli`: contract, accept, report, record, drift, pins), except that
without a command it is the acceptance runner: ``python runner.py --scenario smoke``
is ``peerwire-harness accept --scenario smoke``.
"""

from __future__ import annotations

import sys

from harness.cli import main

if __name__ == "__main__":
    sys.exit(main(default="accept", prog="python runner.py"))
