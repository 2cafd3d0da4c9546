"""regularized."""
