"""The `t9kjobs` command line."""
