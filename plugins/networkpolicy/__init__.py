"""A NetworkPolicy per job that admits only the job's own pods (an operator option)."""
