"""The tool profiles a messaging core serves, by name.

``messaging`` is the peer contract (``contracts/tools/``); ``collab`` the
parent/child tree (``contracts/collab/``). Their tools and schemas are
:mod:`peerwire.contract`'s; this module only names them, so the command line
can do without loading the schemas.
"""

MESSAGING = "messaging"
COLLAB = "collab"
ALL = (MESSAGING, COLLAB)
