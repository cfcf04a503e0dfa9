"""The ``mailbox`` profile: messaging semantics judged through a binding of any server's own tools."""
