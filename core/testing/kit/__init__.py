"""The conformance kit: a plugin's contracts with the engine, run as pytest tests.

`conformance` is the pytest plugin (entry point `t9kjobs-conformance`); `subject` loads the
plugin under test; `contracts` lists the tests, which `behaviour` (what the engine sees of the
plugin's pods and verdicts), `structural` (its CRD schema), `admission`/`admitted` (a real
kube-apiserver's answers) and `noio` (hooks that do no I/O) judge; `calls` runs the hooks as the
engine does; `examples` reads a plugin's example manifests. A broken contract raises
`violation.ContractViolation`, whose message says what was expected and what the plugin did.
"""
