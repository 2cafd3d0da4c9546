"""slkl."""
