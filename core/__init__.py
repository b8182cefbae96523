"""t9k-jobs: a launcher framework for distributed training jobs on Kubernetes."""
