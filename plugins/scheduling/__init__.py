"""Gang scheduling through the T9k scheduler: a PodGroup per job."""
