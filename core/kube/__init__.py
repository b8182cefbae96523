"""The one Kubernetes client of t9k-jobs: every request to an API server goes through here.

* `transport`: the HTTP client (kubeconfig or in-cluster configuration, TLS, a token bucket,
  429s waited out, fencing by the Lease) and `ApiError`;
* `resources`: where each kind is served (`Resource`: its path, its list and watch);
* `decoding`: JSON decoded without recursion, so that no document can stop a reader;
* `informer`: list+watch into a `Store` indexed by controller owner, resumed and relisted;
* `slimming`: what a store keeps of an object.

The controller, the CLI (`describe`, `logs`, completion), the conformance kit's admission tier
and the benchmarks use this package; none of them reaches into `t9kjobs.controller` for it
(an import-linter contract). Objects stay JSON dicts end to end: the kubernetes client library
is used only to read configuration.
"""
