"""Maintainers' tools: same outputs across a refactor, fuzz campaigns, the README's results table,
plots, the GPU run and the import graph."""
