"""PyTorchTrainingJob."""
