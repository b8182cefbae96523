"""Testing tools shipped with t9k-jobs, one subpackage or module per audience.

* `t9kjobs.testing.kit`: the conformance kit, a pytest plugin that judges a framework plugin
  against the engine's contracts (`pytest --t9kjobs-plugin NAME`; docs/conformance.md);
* `t9kjobs.testing.fixtures`: helpers for a plugin's own unit tests (a job from YAML, a
  reconcile through the engine, pods in a phase; docs/plugin-guide.md);
* `t9kjobs.testing.harness`: the processes a test starts and the conventions it relies on: an
  etcd and kube-apiserver of its own (the kit's admission tier runs on it), the operator as a
  process, the CRDs installed, the simulated-pod convention of KWOK clusters (docs/cluster.md).
  It is installed, not kept in the repository's tests, because the kit needs its API server and
  a plugin author's end-to-end tests start the operator and simulate pods the same way ours do.

The kit and the fixtures use the harness; the harness uses neither; none of them reaches into
`t9kjobs.controller` (an import-linter contract): they talk to a cluster through `t9kjobs.kube`.
"""
