"""Bundled framework plugins."""
