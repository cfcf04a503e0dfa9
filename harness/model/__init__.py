"""The scripted model: rules as data (:mod:`.rules`), the Responses-API server on
loopback that answers from them (:mod:`.server`), personas that vary how it plays
them (:mod:`.personas`), and the collaboration probe computed from its request log
(:mod:`.probe`). The log's format and reader are evidence (:mod:`harness.evidence.model_log`)."""
