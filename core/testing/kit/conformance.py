"""The conformance kit for plugins: a pytest plugin, off unless asked for.

Installed with t9k-jobs under the `pytest11` entry point `t9kjobs-conformance`, so any pytest in
an environment holding t9k-jobs has it; it does nothing until given a plugin name:

    pytest --t9kjobs-conformance=NAME --t9kjobs-examples=DIR

NAME is the plugin's entry-point name in the group `t9kjobs.plugins` (repeatable, or
comma-separated); DIR holds its example jobs (default `./examples`; invalid ones under an
`invalid/` folder, see `t9kjobs.testing.kit.examples`). The kit then adds one collector per plugin,
`t9kjobs-conformance[NAME]`, with a named test per contract (`t9kjobs.testing.kit.contracts`) and
per kind or example: `test_crd_is_structural[MPIJob]`, `test_hooks_do_no_io[pi.yaml]`, ...,
each marked `t9kjobs_conformance`. Without test paths on the command line only the kit runs
(the configured `testpaths` are not collected); with paths, their tests run too.

The admission tier (`t9kjobs.testing.kit.admission`) checks the CRDs and the examples on a real API
server: one per kit session, shared by every plugin checked in it, started at its first use from
the local control plane's binaries (or the cluster of `--t9kjobs-kubeconfig`; see
`t9kjobs.testing.harness.apiserver`), stopped when the session ends. The summary says which it used.

The engine is imported only once the kit is asked for, so a plain pytest run pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    from t9kjobs.testing.kit.admission import AdmissionTier

__all__ = [
    "MARKER",
    "ConformanceSuite",
    "ContractItem",
    "pytest_addoption",
    "pytest_configure",
    "pytest_make_collect_report",
    "pytest_terminal_summary",
    "pytest_unconfigure",
]

MARKER = "t9kjobs_conformance"
_DEFAULT_EXAMPLES = "examples"
_TIER = pytest.StashKey["AdmissionTier"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("t9kjobs-conformance", "t9k-jobs plugin conformance kit")
    group.addoption(
        "--t9kjobs-conformance",
        action="append",
        default=[],
        metavar="NAME",
        dest="t9kjobs_conformance",
        help="run the conformance kit on the framework plugin NAME (its entry-point name in"
        " t9kjobs.plugins; repeatable or comma-separated). Without test paths on the command"
        " line, only the kit runs.",
    )
    group.addoption(
        "--t9kjobs-examples",
        action="append",
        default=[],
        metavar="DIR",
        dest="t9kjobs_examples",
        help="folder of the plugin's example jobs, searched recursively; invalid ones under an"
        " invalid/ folder (repeatable; default: ./examples)",
    )
    group.addoption(
        "--t9kjobs-kubeconfig",
        default=None,
        metavar="PATH",
        dest="t9kjobs_kubeconfig",
        help="the admission tier's cluster (default: etcd and kube-apiserver started for the"
        " session from t9k-jobs' local control plane binaries, else $KUBECONFIG); the kit"
        " creates the plugin's CRDs there and deletes them when it ends",
    )


def _plugin_names(config: pytest.Config) -> list[str]:
    given: list[str] = config.getoption("t9kjobs_conformance") or []
    names = [n.strip() for value in given for n in value.split(",")]
    return list(dict.fromkeys(n for n in names if n))


def _example_folders(config: pytest.Config) -> list[Path]:
    given: list[str] = config.getoption("t9kjobs_examples") or [_DEFAULT_EXAMPLES]
    base = config.invocation_params.dir
    return [(base / folder).resolve() for folder in given]


def pytest_configure(config: pytest.Config) -> None:
    if not _plugin_names(config):
        return
    config.addinivalue_line("markers", f"{MARKER}: a contract test of the t9k-jobs conformance kit")
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        # No paths were given: run the kit alone rather than the configured testpaths too.
        config.args = []


def _tier(config: pytest.Config) -> AdmissionTier:
    """The session's admission tier (its API server starts when a contract first needs it)."""
    if _TIER not in config.stash:
        from t9kjobs.testing.kit.admission import AdmissionTier

        config.stash[_TIER] = AdmissionTier(config.getoption("t9kjobs_kubeconfig"))
    return config.stash[_TIER]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if _TIER in config.stash:
        terminalreporter.write_line(
            f"t9kjobs-conformance admission tier: {config.stash[_TIER].origin}"
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    if _TIER in config.stash:
        config.stash[_TIER].close()
        del config.stash[_TIER]


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    if isinstance(collector, pytest.Session) and report.passed:
        folders = _example_folders(collector.config)
        for name in _plugin_names(collector.config):
            report.result.append(
                ConformanceSuite.from_parent(
                    collector,
                    name=f"t9kjobs-conformance[{name}]",
                    nodeid=f"t9kjobs-conformance[{name}]",
                    plugin=name,
                    folders=folders,
                )
            )
    return report


class ContractItem(pytest.Item):
    """One contract on one target; a violation is reported as the contract and what broke it."""

    def __init__(
        self,
        *,
        title: str,
        run: Callable[[], None],
        violations: tuple[type[Exception], ...],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.title = title
        self._run = run
        self._violations = violations
        self.add_marker(MARKER)

    def runtest(self) -> None:
        self._run()

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: TracebackStyle | None = None,
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, self._violations):
            return f"contract violated: {self.title}\n{excinfo.value}"
        # Anything else is the plugin (or the engine) crashing: show where.
        return super().repr_failure(excinfo, style="short")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name}: {self.title}"


class ConformanceSuite(pytest.Collector):
    """The contract tests of one plugin, built once its kinds and examples are known."""

    def __init__(self, *, plugin: str, folders: Sequence[Path], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plugin = plugin
        self.folders = tuple(folders)

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        from t9kjobs.testing.kit import contracts
        from t9kjobs.testing.kit.admitted import crds_of
        from t9kjobs.testing.kit.subject import load_subject

        subject = load_subject(self.plugin, self.folders, _tier(self.config))
        if subject.manager is not None:  # every plugin's CRDs go to the server at once
            _tier(self.config).expect(list(crds_of(subject).values()))

        def item(
            contract: contracts.Contract[Any], target: Any, param: str | None, **kw: Any
        ) -> ContractItem:
            name = f"test_{contract.name}" + (f"[{param}]" if param is not None else "")
            return ContractItem.from_parent(
                self,
                name=name,
                title=contract.title,
                run=partial(contract.check, subject, target),
                violations=contracts.VIOLATIONS,
                **kw,
            )

        feature = subject.feature
        plugin_contracts = contracts.FEATURE_CONTRACTS if feature else contracts.PLUGIN_CONTRACTS
        for plugin_contract in plugin_contracts:
            yield item(plugin_contract, None, None)
        for kind in sorted(subject.kinds):
            for kind_contract in contracts.KIND_CONTRACTS:
                yield item(kind_contract, kind, kind)
        for example in subject.examples:
            if example.invalid:
                chosen = contracts.INVALID_CONTRACTS
            elif example.error is not None:  # unreadable: one failure says so, not ten
                chosen = contracts.EXAMPLE_CONTRACTS[:1]
            else:
                chosen = (
                    contracts.FEATURE_EXAMPLE_CONTRACTS if feature else contracts.EXAMPLE_CONTRACTS
                )
            for example_contract in chosen:
                yield item(example_contract, example, example.id, path=example.path)
