"""The documentation as package data, ``peerwire_data.docs`` (mapped by ``setup.py``).

Nothing here is code: the package exists so that an installed peerwire carries its pages and
finds them through :mod:`importlib.resources` (``peerwire-harness docs``).
"""
