"""The reference core's lab: the fault campaign and the benchmark, run from a checkout against the core.

``python -m peerwire_lab.faults`` kills, starves and floods a ``peerwire app``
and judges it from its receipts and records (:mod:`peerwire_lab.faults`, the
local surface's faults in :mod:`peerwire_lab.surface_faults`);
``python -m peerwire_lab.bench`` (``make bench``) measures it beside baselines
of the same run. Neither ships in the wheel: they drive the reference core, and
the core imports nothing from here.
"""
