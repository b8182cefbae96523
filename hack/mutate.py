"""Mutation testing of the planner and the plugins: `make mutate` (slow; not part of `make test`).

A mutant is one small change to one module's syntax tree (an operator, a comparison, a constant,
a string literal, a boolean operator, a removed statement). It is *killed* when the unit tests
chosen for its module fail or hang with the change, and *survives* when they pass: a surviving
mutant is a behaviour no test pins down, or (listed in hack/mutate-equivalent.toml with the
reason) a change that cannot alter behaviour.

Why a mutator of the project's own (docs/testing.md has the details): mutmut 3 mutates only
inside functions (the reserved env names, torchrun and DeepSpeed option tables are module
constants) and names modules by their path (`core.planner.plan`, where the package is
`t9kjobs.planner.plan`); cosmic-ray copes with the layout but mutates no string literals and runs
one process per mutant, one at a time.

How a mutant runs: this process imports the third-party libraries and pytest once, then forks
one child per mutant. The child puts a finder first on `sys.meta_path` that serves the mutated
module (compiled from the changed tree, with the file's name, so tracebacks point at it), then
runs pytest in-process, `-x`. No file is ever rewritten, so runs in parallel (`--jobs`) cannot
see each other's mutants. A first run of each module's tests under coverage records which test
executes which line; a mutant runs only the tests that execute its lines (all of the module's
tests for a line run at import, such as a module constant), and one that survives them is run
again against all of the module's tests before it counts as surviving.

    python hack/mutate.py                        # every module; rewrites docs/testing.md
    python hack/mutate.py plugins/pytorch/*.py   # these modules; prints survivors
    python hack/mutate.py --list core/kinds.py   # the mutants, not run
    python hack/mutate.py --write-equivalent     # the equivalent mutants' list, from its file
"""

from __future__ import annotations

import argparse
import ast
import copy
import fnmatch
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import signal
import sys
import time
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import CodeType, ModuleType

import coverage
import pytest

REPO = Path(__file__).resolve().parents[1]
EQUIVALENT = REPO / "hack" / "mutate-equivalent.toml"
DOC = REPO / "docs" / "testing.md"
REPORT = REPO / "build" / "mutate" / "survivors.txt"

# Unit tests that start processes (they would run the unmutated code), are timing-sensitive,
# or test none of the mutated modules: left out of the core modules' tests.
_NOT_CHOSEN = (
    "core/controller",
    "core/kube",
    "core/testing/kit",  # the conformance kit's own tests: API servers and pytester runs
    "core/cli/test_cli.py",
    "core/testing/test_conformance.py",
    "deploy/test_chart.py",
    "deploy/test_dockerfile.py",
    "deploy/test_packaging.py",
    "examples/test_examples_header.py",
    "hack/test_mutate.py",
    "hack/test_plugin_guide.py",
)
_CORE_TESTS = ("tests/unit", *(f"--ignore=tests/unit/{name}" for name in _NOT_CHOSEN))
# The modules mutated (globs, first match wins) and the unit tests each one's mutants run
# (`{plugin}` is the plugin's folder name). The CRDs are generated from the spec models, so their
# tests judge the specs.
TARGETS: dict[str, tuple[str, ...]] = {
    "core/planner/*.py": _CORE_TESTS,
    "core/validation.py": _CORE_TESTS,
    "core/kinds.py": _CORE_TESTS,
    "core/ssh.py": _CORE_TESTS,
    "plugins/*/spec.py": ("tests/unit/plugins/{plugin}", "tests/unit/core/crds/test_crds.py"),
    "plugins/*/*.py": ("tests/unit/plugins/{plugin}",),
}
# Loaded before forking: the children share them instead of importing them per mutant.
_PRELOAD = ("pydantic", "pluggy", "jinja2", "yaml", "cryptography", "click")
_COVERAGE = REPO / "build" / "mutate" / "coverage"

_BINOPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.Mult,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
}
_COMPARISONS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclass(frozen=True)
class Mutant:
    """One change: the `variant`-th way to change the `site`-th mutable node of `path`."""

    path: str
    site: int
    variant: int
    line: int
    end_line: int
    scope: str  # qualified name of the enclosing function or class, `<module>` outside
    before: str
    after: str
    occurrence: int = 1  # the n-th mutant of `path` with this scope, before and after

    @property
    def key(self) -> str:
        """Stable across unrelated edits (no line number): how hack/mutate-equivalent.toml
        names a mutant."""
        suffix = f" #{self.occurrence}" if self.occurrence > 1 else ""
        return f"{self.path}::{self.scope}: {self.before} -> {self.after}{suffix}"


def _short(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= 70 else text[:67] + "..."


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _variants(node: ast.AST, in_fstring: bool) -> list[ast.AST]:
    """The changed copies of `node` this mutator makes (none for most nodes)."""
    if isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _BINOPS:
        changed = copy.copy(node)
        changed.op = _BINOPS[type(node.op)]()
        return [changed]
    if isinstance(node, ast.Compare):
        out: list[ast.AST] = []
        for i, op in enumerate(node.ops):
            changed = copy.copy(node)
            changed.ops = [*node.ops[:i], _COMPARISONS[type(op)](), *node.ops[i + 1 :]]
            out.append(changed)
        return out
    if isinstance(node, ast.BoolOp):
        flipped = copy.copy(node)
        flipped.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return [flipped]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        return [node.operand]
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            return [ast.Constant(not value)]
        if isinstance(value, int | float):
            return [ast.Constant(value + 1)]
        if isinstance(value, str):
            # Empty a string, fill an empty one; a part of an f-string can only be emptied.
            if value:
                return [ast.Constant("")]
            return [] if in_fstring else [ast.Constant("XX")]
        return []
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return [ast.Pass()]
    if isinstance(node, ast.Assign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if all(isinstance(t, ast.Attribute | ast.Subscript) for t in targets):
            return [ast.Pass()]  # a write into an object, dropped
    return []


class _Sites(ast.NodeTransformer):
    """Walks a module in a fixed order, numbering the nodes it can change. Collects the mutants,
    or, given one, returns the tree with that change made."""

    def __init__(self, path: str, target: Mutant | None = None) -> None:
        self.path = path
        self.target = target
        self.mutants: list[Mutant] = []
        self.site = 0
        self.scopes: list[str] = []
        self.in_fstring = False

    def _scope(self) -> str:
        return ".".join(self.scopes) or "<module>"

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns", "format_spec", "type_comment"):
                continue  # types and f-string formats are not behaviour to mutate
            if isinstance(value, list):
                body = field in ("body", "orelse", "finalbody")
                new: list[object] = []
                for k, item in enumerate(value):
                    if not isinstance(item, ast.AST):
                        new.append(item)
                        continue
                    if body and k == 0 and isinstance(item, ast.stmt) and _is_docstring(item):
                        new.append(item)
                        continue
                    result = self.visit(item)
                    if result is not None:
                        new.append(result)
                value[:] = new
            elif isinstance(value, ast.AST):
                setattr(node, field, self.visit(value))
        return node

    def visit(self, node: ast.AST) -> ast.AST:
        if _skipped(node):
            return node
        scoped = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        if scoped:
            self.scopes.append(node.name)  # type: ignore[attr-defined]
        outer = self.in_fstring
        self.in_fstring = outer or isinstance(node, ast.JoinedStr)
        site = self.site
        variants = [] if scoped else _variants(node, outer)
        self.site += 1 if variants else 0
        replacement: ast.AST | None = None
        for k, changed in enumerate(variants):
            if self.target is None:
                self.mutants.append(
                    Mutant(
                        self.path,
                        site,
                        k,
                        getattr(node, "lineno", 0),
                        getattr(node, "end_lineno", None) or getattr(node, "lineno", 0),
                        self._scope(),
                        _short(node),
                        _short(changed),
                    )
                )
            elif self.target.site == site and self.target.variant == k:
                replacement = changed
        try:
            if replacement is not None:
                return replacement
            return self.generic_visit(node)
        finally:
            self.in_fstring = outer
            if scoped:
                self.scopes.pop()


def _skipped(node: ast.AST) -> bool:
    """Names and documentation, not behaviour: `__all__`, `description=` of model fields."""
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    return isinstance(node, ast.keyword) and node.arg == "description"


def module_name(path: str) -> str:
    """core/planner/plan.py -> t9kjobs.planner.plan; plugins/x/y.py -> t9kjobs.plugins.x.y."""
    parts = list(Path(path).with_suffix("").parts)
    parts[0] = "t9kjobs" if parts[0] == "core" else "t9kjobs.plugins"
    return ".".join(parts)


def mutants_of(path: str) -> list[Mutant]:
    source = (REPO / path).read_text()
    sites = _Sites(path)
    sites.visit(ast.parse(source))
    seen: Counter[tuple[str, str, str]] = Counter()
    out = []
    for m in sites.mutants:
        seen[(m.scope, m.before, m.after)] += 1
        out.append(replace(m, occurrence=seen[(m.scope, m.before, m.after)]))
    return out


def mutated_code(mutant: Mutant) -> CodeType:
    tree = _Sites(mutant.path, mutant).visit(ast.parse((REPO / mutant.path).read_text()))
    return compile(ast.fix_missing_locations(tree), str(REPO / mutant.path), "exec")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves one module from a code object (the mutant) instead of its file."""

    def __init__(self, name: str, path: str, code: CodeType | None) -> None:
        self.name, self.path, self.code = name, path, code

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self.code is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=self.path)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.__file__ = self.path
        assert self.code is not None
        exec(self.code, module.__dict__)


class _TestContexts:
    """A pytest plugin that names the coverage context after the test running (its node id)."""

    def __init__(self, cov: coverage.Coverage) -> None:
        self.cov = cov

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.cov.switch_context(item.nodeid)
        yield
        self.cov.switch_context("")


# The child's exit code when the module under test was imported, but not as the mutant.
_NOT_SERVED = 99


def _child(mutant: Mutant | None, tests: Sequence[str], traced: Path | None) -> None:
    """In the forked child: run `tests` with `mutant` in place (with coverage written to
    `traced`); exits with pytest's code.

    Assertions are not rewritten (`--assert=plain`): pytest's rewriting hook goes first on
    `sys.meta_path` and may load modules it takes for its own past the mutant's finder."""
    os.setpgid(0, 0)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    finder = None
    if mutant is not None:
        path = str(REPO / mutant.path)
        finder = _Finder(module_name(mutant.path), path, mutated_code(mutant))
        sys.meta_path.insert(0, finder)
    os.chdir(REPO)
    args = ["-x", "-q", "--assert=plain", "-p", "no:cacheprovider", "-p", "no:randomly", *tests]
    if traced is None:
        code = pytest.main(args)
        module = sys.modules.get(finder.name) if finder is not None else None
        served = module is None or getattr(module.__spec__, "loader", None) is finder
        os._exit(int(code) if served else _NOT_SERVED)
    cov = coverage.Coverage(data_file=str(traced), source_pkgs=["t9kjobs"])
    cov.start()
    code = pytest.main(args, plugins=[_TestContexts(cov)])
    cov.stop()
    cov.save()
    os._exit(int(code))


@dataclass
class Outcome:
    mutant: Mutant | None
    status: str  # killed, timeout, survived
    seconds: float


@dataclass(frozen=True)
class Job:
    mutant: Mutant | None  # None: the tests as they are
    tests: tuple[str, ...]
    timeout: float
    traced: Path | None = None  # where to write coverage, if anywhere


def run_all(
    jobs: Sequence[Job], workers: int, progress: Callable[[Outcome], None]
) -> list[Outcome]:
    """Run each job in a forked child, `workers` at a time."""
    pending = list(reversed(jobs))
    running: dict[int, tuple[Mutant | None, float, float]] = {}
    outcomes = []
    while pending or running:
        while pending and len(running) < workers:
            job = pending.pop()
            mutant, timeout = job.mutant, job.timeout
            pid = os.fork()
            if pid == 0:
                try:
                    _child(mutant, job.tests, job.traced)
                finally:
                    os._exit(70)
            running[pid] = (mutant, time.monotonic(), timeout)
        pid, status = os.waitpid(-1, os.WNOHANG)
        now = time.monotonic()
        if pid == 0:
            for child, (mutant, start, timeout) in list(running.items()):
                if now - start > timeout:
                    os.killpg(child, signal.SIGKILL)
                    os.waitpid(child, 0)
                    del running[child]
                    outcomes.append(Outcome(mutant, "timeout", now - start))
                    progress(outcomes[-1])
            time.sleep(0.01)
            continue
        mutant, start, _ = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        if code == _NOT_SERVED and mutant is not None:
            raise SystemExit(f"{mutant.key}: the tests imported the module, not the mutant")
        passed = code == 0
        outcomes.append(Outcome(mutant, "survived" if passed else "killed", now - start))
        progress(outcomes[-1])
    return outcomes


def tests_for(path: str) -> tuple[str, ...]:
    for pattern, tests in TARGETS.items():
        if fnmatch.fnmatch(path, pattern):
            plugin = Path(path).parent.name
            return tuple(t.format(plugin=plugin) for t in tests)
    raise SystemExit(f"{path}: not a module `make mutate` covers (see TARGETS in {__file__})")


def _every() -> list[str]:
    """Every module `make mutate` covers (paths relative to the repo)."""
    return sorted(
        str(p.relative_to(REPO))
        for pattern in TARGETS
        for p in REPO.glob(pattern)
        if p.name != "__init__.py"
    )


def modules(selected: Sequence[str]) -> list[str]:
    """The covered modules, or those of `selected` (paths relative to the repo)."""
    if not selected:
        return _every()
    chosen = [
        str(Path(s).resolve().relative_to(REPO)) for s in selected if Path(s).name != "__init__.py"
    ]
    for path in chosen:
        tests_for(path)
    return chosen


def tests_of_lines(traced: Path) -> dict[str, dict[int, set[str]]]:
    """Module path -> line -> the tests (node ids) that executed it; "" for outside a test."""
    data = coverage.CoverageData(basename=str(traced))
    data.read()
    # The package is imported from core/ and plugins/ (the editable install), or from a copy
    # assembled as t9kjobs/ (build/layout): a file is known by its module's path either way.
    by_file = {str(REPO / p): p for p in _every()}
    by_file |= {module_name(p).replace(".", "/") + ".py": p for p in _every()}
    out: dict[str, dict[int, set[str]]] = {}
    for filename in data.measured_files():
        path = by_file.get(filename) or by_file.get(
            "t9kjobs/" + filename.rpartition("/t9kjobs/")[2]
        )
        if path is not None:
            out[path] = {n: set(c) for n, c in data.contexts_by_lineno(filename).items()}
    return out


def select(
    mutant: Mutant, lines: dict[int, set[str]], all_tests: tuple[str, ...]
) -> tuple[str, ...]:
    """The tests that execute the mutant's lines; all of them when a line runs at import (or
    none of the lines was seen: a session fixture may have run it before tracing started)."""
    found: set[str] = set()
    for n in range(mutant.line, mutant.end_line + 1):
        found |= lines.get(n, set())
    if not found or "" in found:
        return all_tests
    return tuple(sorted(found))


def load_equivalent() -> dict[str, str]:
    """Mutant key -> why it cannot change behaviour."""
    data = tomllib.loads(EQUIVALENT.read_text())
    return {str(k): str(v) for k, v in data.get("equivalent", {}).items()}


@dataclass
class Score:
    path: str
    mutants: int = 0
    killed: int = 0
    equivalent: int = 0

    @property
    def survived(self) -> int:
        return self.mutants - self.killed - self.equivalent

    @property
    def percent(self) -> float:
        judged = self.mutants - self.equivalent
        return 100.0 * self.killed / judged if judged else 100.0


def _table(scores: list[Score]) -> Iterator[str]:
    yield "| module | mutants | killed | equivalent | survived | score |"
    yield "| --- | ---: | ---: | ---: | ---: | ---: |"
    total = Score("**all**")
    for s in scores:
        yield (
            f"| `{s.path}` | {s.mutants} | {s.killed} | {s.equivalent} | {s.survived}"
            f" | {s.percent:.1f}% |"
        )
        total.mutants += s.mutants
        total.killed += s.killed
        total.equivalent += s.equivalent
    yield (
        f"| {total.path} | {total.mutants} | {total.killed} | {total.equivalent}"
        f" | {total.survived} | {total.percent:.1f}% |"
    )


_SECTION = re.compile(
    r"(<!-- BEGIN GENERATED: mutation -->\n).*?(<!-- END GENERATED: mutation -->)", re.DOTALL
)
_EQUIVALENT_SECTION = re.compile(
    r"(<!-- BEGIN GENERATED: mutation-equivalent -->\n).*?"
    r"(<!-- END GENERATED: mutation-equivalent -->)",
    re.DOTALL,
)


def _rewrite(section: re.Pattern[str], name: str, lines: list[str]) -> None:
    text = DOC.read_text()
    if not section.search(text):
        raise SystemExit(f"{DOC}: no `<!-- BEGIN GENERATED: {name} -->` section")
    body = "\n".join(lines)
    DOC.write_text(section.sub(lambda m: m.group(1) + body + m.group(2), text))


def write_equivalent(equivalent: dict[str, str]) -> None:
    """The list of equivalent mutants, from hack/mutate-equivalent.toml: rewritten by every run
    (a run of some modules too), as it follows the file, not the run."""
    lines = [
        "Equivalent mutants (excluded from the scores; `hack/mutate-equivalent.toml`):",
        "",
        *(f"- `{key}`: {why}" for key, why in sorted(equivalent.items())),
        "",
    ]
    _rewrite(_EQUIVALENT_SECTION, "mutation-equivalent", lines)


def write_doc(scores: list[Score], seconds: float, workers: int) -> None:
    """The scores of a full run."""
    minutes, secs = divmod(round(seconds), 60)
    lines = [
        f"Last full run: `make mutate`, {sum(s.mutants for s in scores)} mutants in"
        f" {minutes} min {secs} s with {workers} workers on the project's 2-core machine.",
        "",
        *_table(scores),
        "",
    ]
    _rewrite(_SECTION, "mutation", lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="modules to mutate (default: all covered)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants at once")
    parser.add_argument("--list", action="store_true", help="list the mutants; run nothing")
    parser.add_argument(
        "--write-equivalent",
        action="store_true",
        help="rewrite the list of equivalent mutants in docs/testing.md; run nothing",
    )
    args = parser.parse_args(argv)
    if args.write_equivalent:
        write_equivalent(load_equivalent())
        return 0
    paths = modules(args.paths)
    equivalent = load_equivalent()
    every = {p: mutants_of(p) for p in paths}
    if args.list:
        for mutants in every.values():
            for m in mutants:
                print(f"{m.path}:{m.line}: {m.key}")
        return 0
    for name in _PRELOAD:
        importlib.import_module(name)
    if any(n == "t9kjobs" or n.startswith("t9kjobs.") for n in sys.modules):
        raise SystemExit("t9kjobs was imported before forking: mutants would not be seen")

    started = time.monotonic()
    selections = sorted({tests_for(p) for p in paths})
    _COVERAGE.mkdir(parents=True, exist_ok=True)
    traces = {tests: _COVERAGE / f"selection-{i}" for i, tests in enumerate(selections)}
    baseline = run_all(
        [Job(None, tests, 600.0, traces[tests]) for tests in selections], args.jobs, lambda o: None
    )
    limits = {}
    lines: dict[str, dict[int, set[str]]] = {}
    for tests, outcome in zip(selections, baseline, strict=True):
        if outcome.status != "survived":
            raise SystemExit(f"the tests fail without any mutant: pytest {' '.join(tests)}")
        limits[tests] = max(10.0, 5 * outcome.seconds)
        for path, by_line in tests_of_lines(traces[tests]).items():
            if tests_for(path) == tests:
                lines[path] = by_line

    def job(m: Mutant, every_test: bool) -> Job:
        tests = tests_for(m.path)
        chosen = tests if every_test else select(m, lines.get(m.path, {}), tests)
        return Job(m, chosen, limits[tests])

    candidates = [m for ms in every.values() for m in ms if m.key not in equivalent]
    done = 0

    def progress(outcome: Outcome) -> None:
        nonlocal done
        done += 1
        if done % 100 == 0:
            print(f"  {done} runs, {len(candidates)} mutants", file=sys.stderr, flush=True)

    first = run_all([job(m, False) for m in candidates], args.jobs, progress)
    # A survivor of the tests that execute its lines faces all of its module's tests.
    recheck = {
        o.mutant
        for o in first
        if o.status == "survived" and o.mutant and job(o.mutant, False) != job(o.mutant, True)
    }
    outcomes = [o for o in first if o.mutant not in recheck]
    outcomes += run_all(
        [job(m, True) for m in sorted(recheck, key=candidates.index)], args.jobs, progress
    )
    seconds = time.monotonic() - started

    scores = {p: Score(p, mutants=len(ms)) for p, ms in every.items()}
    stale = set(equivalent)
    for mutants in every.values():
        for m in mutants:
            if m.key in equivalent:
                scores[m.path].equivalent += 1
                stale.discard(m.key)
    survivors: dict[str, list[Mutant]] = defaultdict(list)
    for outcome in outcomes:
        assert outcome.mutant is not None
        if outcome.status == "survived":
            survivors[outcome.mutant.path].append(outcome.mutant)
        else:
            scores[outcome.mutant.path].killed += 1

    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("w") as report:
        for path in paths:
            for m in sorted(survivors[path], key=lambda m: (m.line, m.site, m.variant)):
                print(f"{m.path}:{m.line}: {m.key}", file=report)
    print(REPORT.read_text(), end="")
    print("\n".join(_table(list(scores.values()))))
    minutes, secs = divmod(round(seconds), 60)
    print(f"{len(candidates)} mutants run in {minutes} min {secs} s; survivors in {REPORT}")
    if not args.paths:
        if stale:
            print("equivalent mutants no module has any more (remove them):", *sorted(stale))
        write_doc(list(scores.values()), seconds, args.jobs)
        print(f"scores written to {DOC}")
    write_equivalent(equivalent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
