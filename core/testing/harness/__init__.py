"""What a test starts and relies on (see `t9kjobs.testing`): `apiserver` (an etcd and a
kube-apiserver of the test's own, stopped with it), `process` (the operator and other servers
as processes), `crds` (the kinds' CRDs installed on a cluster), `simulation` (the annotations
that make a pod run S seconds and exit N under KWOK)."""
