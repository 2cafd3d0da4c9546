"""Dask arrays as estimator inputs: :mod:`.dispatch` routes a dask ``X`` at the estimator boundary
(predictions over row chunks, gathering where a method needs the rows in memory), and
:mod:`.fit` drives the fits that run over row chunks (sums over rows, mini-batches), each planned by
:mod:`.memory` within the workers' memory_limit before anything is submitted.

A family's distributed pass is stated against the row executors of :mod:`kernelscale.ops.rows`;
only what cannot be stated that way lives in the family's own ``distributed`` module.
"""
