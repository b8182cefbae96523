"""Tools for testing jobs without real nodes: the simulated-pod convention of the local cluster
(`docs/cluster.md`), and (later) the conformance kit for plugin authors."""
