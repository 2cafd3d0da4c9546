"""lssvm."""
