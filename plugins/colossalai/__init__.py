"""ColossalAIJob."""
