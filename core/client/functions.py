"""A Python function as a job (`Client.train`): how it travels, and the job that runs it.

The function travels as its source, not pickled: a program made of the imports it needs and its
`def`, carried in the training container's environment (a JSON string, one line) beside its
arguments as JSON and the runner (`t9kjobs.client.runner`). Whoever reviews the job (`kubectl
get -o yaml`, `t9kjobs render`) reads exactly what will run; the image needs neither
cloudpickle nor the notebook's Python version, and nothing opaque is executed in the cluster.
The price is that what the function refers to must be namable, which is checked here before
anything is sent:

* a plain function written with `def` at the top level of its cell or module, no lambda, no
  nested function, no closure, no decorator; its source must be readable (`inspect`);
* every global it reads (its body, its defaults) is a builtin, a module (sent as `import`), or
  a function or class of an importable module (sent as `from M import N`); a name of the
  notebook (`__main__`: data, another function, a constant) or one that is not defined stops it,
  named, with the way out: pass it as an argument, or import or define it inside the function;
* no relative import, and no module that lives in the working folder (a local file that does
  not travel);
* arguments are JSON (numbers, strings, lists, dicts): each other one is named.

Every refusal is a `FunctionNotSendable` naming what cannot be sent.
"""

from __future__ import annotations

import ast
import builtins
import dis
import importlib.util
import inspect
import json
import os
import textwrap
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t9kjobs import progress
from t9kjobs.client import runner
from t9kjobs.client.errors import ClientError

__all__ = ["FunctionNotSendable", "Packaged", "package_function"]


class FunctionNotSendable(ClientError):
    """The function (or an argument) cannot travel to the job; the message names what."""


@dataclass(frozen=True)
class Packaged:
    """A function ready to travel: its program, its name and its arguments as JSON."""

    name: str
    program: str
    arguments: str  # {"args": [...], "kwargs": {...}}

    def env(self) -> dict[str, str]:
        """What the runner reads, by variable name (the runner itself too); sources as JSON
        strings, one line each (`t9kjobs.client.runner`)."""
        return {
            runner.FUNCTION_ENV: json.dumps(self.program),
            runner.NAME_ENV: self.name,
            runner.ARGS_ENV: self.arguments,
            runner.RUNNER_ENV: json.dumps(_own_source(runner)),
            runner.PROGRESS_ENV: json.dumps(_own_source(progress)),
        }


def _own_source(module: types.ModuleType) -> str:
    return Path(str(module.__file__)).read_text()


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _global_names(code: types.CodeType) -> list[str]:
    """The global names the code (and the code nested in it) reads, in order of first use."""
    seen: dict[str, None] = {}
    for each in _codes(code):
        for ins in dis.get_instructions(each):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str):
                seen.setdefault(ins.argval)
    return list(seen)


def _local_module(name: str) -> bool:
    """Whether `name` is a module found in the working folder, outside any installed place
    (`t9kjobs` never is: its progress module travels with the runner)."""
    if name.split(".")[0] == "t9kjobs":
        return False
    try:
        spec = importlib.util.find_spec(name.split(".")[0])
    except (ImportError, ValueError):
        return False
    origin = spec.origin if spec is not None else None
    if not origin or origin in ("built-in", "frozen"):
        return False
    path = os.path.realpath(origin)
    installed = any(part in path for part in ("site-packages", "dist-packages"))
    return not installed and path.startswith(os.path.realpath(os.getcwd()) + os.sep)


def _import_line(name: str, value: Any, problems: list[str]) -> str | None:
    """The line that gives the program the global `name` the function reads, or None after
    recording why it cannot."""
    if isinstance(value, types.ModuleType):
        module = value.__name__
        if module == "__main__" or _local_module(module):
            problems.append(f"`{name}` is the module {module}, which does not travel")
            return None
        top, _, rest = module.rpartition(".")
        if not top:
            return f"import {module}" if module == name else f"import {module} as {name}"
        return f"from {top} import {rest}" + ("" if rest == name else f" as {name}")
    owner = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if not owner or owner == "__main__" or qualname is None or "." in qualname:
        what = type(value).__name__
        problems.append(f"`{name}` (a {what} of the notebook or script, module __main__)")
        return None
    if _local_module(owner):
        problems.append(f"`{name}` comes from {owner}, a local file that does not travel")
        return None
    return f"from {owner} import {qualname}" + ("" if qualname == name else f" as {name}")


def _definition(fn: types.FunctionType) -> ast.FunctionDef:
    what = f"{fn.__qualname__}"
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise FunctionNotSendable(
            f"{what}: its source cannot be read (defined by exec or at an interactive prompt"
            " without a file?): define it in a notebook cell or a module file"
        ) from None
    tree = ast.parse(source)
    node = tree.body[0] if tree.body else None
    if isinstance(node, ast.AsyncFunctionDef):
        raise FunctionNotSendable(f"{what} is async: send a plain function")
    if not isinstance(node, ast.FunctionDef):
        raise FunctionNotSendable(f"{what}: its source is no `def`")
    if node.decorator_list:
        raise FunctionNotSendable(
            f"{what} is decorated: the decorator does not travel; send the undecorated function"
        )
    return node


def _default_names(node: ast.FunctionDef) -> list[str]:
    """The names the defaults of the function's arguments read (evaluated where it is sent)."""
    exprs = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    return [n.id for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name)]


def _import_problems(node: ast.FunctionDef) -> list[str]:
    problems = []
    for each in ast.walk(node):
        if isinstance(each, ast.ImportFrom) and each.level:
            problems.append(f"a relative import (`from {'.' * each.level}{each.module or ''}`)")
        modules = (
            [a.name for a in each.names]
            if isinstance(each, ast.Import)
            else [each.module]
            if isinstance(each, ast.ImportFrom) and each.module and not each.level
            else []
        )
        problems += [
            f"`import {m}`: a local file that does not travel" for m in modules if _local_module(m)
        ]
    return problems


def _arguments(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    problems = []
    for where, value in [*((f"args[{i}]", a) for i, a in enumerate(args)), *kwargs.items()]:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            problems.append(f"{where} ({type(value).__name__}: {exc})")
    if problems:
        raise FunctionNotSendable(
            f"{name}: arguments travel as JSON (numbers, strings, booleans, None, lists, dicts);"
            f" not {', '.join(problems)}: pass a path or a small value and load it inside"
        )
    return json.dumps({"args": list(args), "kwargs": dict(kwargs)})


def package_function(
    fn: Callable[..., Any], args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
) -> Packaged:
    """`fn` and its arguments ready to travel (module docstring), or `FunctionNotSendable`."""
    kwargs = dict(kwargs or {})
    if not isinstance(fn, types.FunctionType):
        raise FunctionNotSendable(
            f"{fn!r} is a {type(fn).__name__}, not a function defined with `def`: send one"
        )
    name = fn.__qualname__
    if fn.__name__ == "<lambda>":
        raise FunctionNotSendable(
            f"a lambda cannot be sent (its source is part of a larger line): define it with"
            f" `def` at the top level of a cell or module ({fn.__code__.co_filename}:"
            f"{fn.__code__.co_firstlineno})"
        )
    if fn.__closure__ or "<locals>" in name:
        free = ", ".join(f"`{v}`" for v in fn.__code__.co_freevars) or "its enclosing function"
        raise FunctionNotSendable(
            f"{name} is defined inside another function and reads {free} from it (a closure):"
            " define it at the top level and pass those values as arguments"
        )
    node = _definition(fn)
    scope = fn.__globals__
    lines: list[str] = []
    problems = _import_problems(node)
    for global_name in dict.fromkeys([*_default_names(node), *_global_names(fn.__code__)]):
        if global_name == fn.__name__:
            continue  # recursion: the program defines it
        if global_name in scope:
            line = _import_line(global_name, scope[global_name], problems)
            if line is not None:
                lines.append(line)
        elif not hasattr(builtins, global_name):
            problems.append(f"`{global_name}` (not defined)")
    if problems:
        raise FunctionNotSendable(
            f"{name} refers to what cannot be sent: {'; '.join(problems)}. Pass values as"
            " arguments, and import or define what it uses inside the function"
        )
    try:
        signature = inspect.signature(fn)
        context = {
            k: 0 for k in runner.CONTEXT_ARGUMENTS if k in signature.parameters and k not in kwargs
        }
        signature.bind(*args, **kwargs, **context)
    except TypeError as exc:
        raise FunctionNotSendable(f"{name}: the arguments do not fit it: {exc}") from None
    origin = f"{fn.__module__}, {fn.__code__.co_filename}:{fn.__code__.co_firstlineno}"
    program = "\n".join(
        [
            f"# {name}, sent by t9kjobs Client.train from {origin}",
            "from __future__ import annotations",  # its annotations are never evaluated
            *lines,
            "",
            ast.get_source_segment(textwrap.dedent(inspect.getsource(fn)), node) or "",
            "",
        ]
    )
    return Packaged(fn.__name__, program, _arguments(name, args, kwargs))
