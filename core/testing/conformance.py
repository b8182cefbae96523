"""The conformance kit (being written)."""
