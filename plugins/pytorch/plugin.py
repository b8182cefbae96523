"""Hook implementations (being written)."""
