"""doubly_stochastic."""
