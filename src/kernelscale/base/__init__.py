"""Estimator plumbing shared by every family: the validation boundary (:mod:`.validation`),
parameter constraints (:mod:`.params`), commit-once fits, weights and warm starts
(:mod:`.estimator`), class coding (:mod:`.classifier`), progress and callbacks (:mod:`.monitor`)
and the ``device`` entry (:mod:`.device`).

Nothing here evaluates a kernel or touches n rows beyond validating them; that is
:mod:`kernelscale.ops`. This package imports no method family, so every family may import it.
"""
