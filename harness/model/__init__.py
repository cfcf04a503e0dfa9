"""The scripted model: rules as data (:mod:`.rules`), the Responses-API server on
loopback that answers from them (:mod:`.server`), the reader of its request log
(:mod:`.log`) and the collaboration probe computed from that log (:mod:`.probe`)."""
