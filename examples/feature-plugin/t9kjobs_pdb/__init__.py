"""A PodDisruptionBudget per job: a third-party feature plugin for t9k-jobs."""
