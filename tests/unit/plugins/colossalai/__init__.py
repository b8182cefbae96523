"""Unit tests of the ColossalAIJob plugin."""
