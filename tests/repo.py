"""`REPO`: the repository's root, for every tier (examples, charts, hack scripts, generated
files are read from it). Defined here once: each tier once computed it from its own depth
below the root (`parents[1]`, `parents[2]`, ...), and a file that moves must not point
elsewhere (tests/unit/test_hallway.py checks that no other module defines it)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO"]

REPO = Path(__file__).resolve().parents[1]
