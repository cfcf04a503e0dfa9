"""The agents' model side: the scripted model's rules as data (:mod:`.rules`), the Responses-API server on
loopback that answers from them (:mod:`.server`), personas that vary how it plays them (:mod:`.personas`),
the recording proxy in front of a real provider (:mod:`.proxy`), the request log both write (:mod:`.log`),
and the collaboration probe computed from that log (:mod:`.probe`). The log's reader is evidence
(:mod:`harness.evidence.model_log`)."""
