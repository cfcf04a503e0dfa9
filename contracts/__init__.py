"""The messaging contract as package data, ``peerwire_data.contracts`` (mapped by ``setup.py``).

Nothing here is code: the package exists so that an installed peerwire finds these
files through :mod:`importlib.resources` (see :mod:`peerwire.resources`).
"""
