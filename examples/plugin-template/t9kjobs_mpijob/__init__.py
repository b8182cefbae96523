"""MPIJob for t9k-jobs: a launcher runs `mpirun` over ssh on N workers that run sshd."""
