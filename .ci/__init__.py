"""The recorded durations shards are balanced by, as package data, ``peerwire_data.ci`` (mapped by ``setup.py``).

Nothing here is code: the package exists so that an installed peerwire finds
``durations.json`` through :mod:`importlib.resources` (see :mod:`harness.resources`).
"""
