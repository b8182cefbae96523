"""The scale benchmark of issue 11: our operator, Kubeflow's training operator and a plain
parallel client creating the same pods on the local control plane. See bench/README.md."""
