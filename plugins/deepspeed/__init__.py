"""DeepSpeedJob."""
