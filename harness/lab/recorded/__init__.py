"""Recorded app-server exchanges: the delivery routes driven live (:mod:`.routes`),
recorded into ``fixtures/appserver/`` (:mod:`.record`) and replayed to the
adapter without a Codex process (:mod:`.replay`)."""
