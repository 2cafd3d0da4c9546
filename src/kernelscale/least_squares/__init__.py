"""least_squares."""
