#!/usr/bin/env bash
# CI of this plugin: a virtualenv with t9k-jobs and the plugin, then lint, types, the plugin's
# own tests and the t9k-jobs conformance kit. Exits non-zero at the first failure.
#
#   T9KJOBS=/path/t9k_jobs-0.2.0-py3-none-any.whl ./ci.sh
#                       a fresh .venv; t9k-jobs from its wheel (`make dist` in a t9k-jobs
#                       checkout writes it to dist/). T9KJOBS is any pip requirement: the
#                       wheel, 't9k-jobs>=0.2,<0.3' from a package index that serves it (t9k-jobs
#                       is not on PyPI), or a checkout's path (pip then writes build/ and
#                       t9k_jobs.egg-info/ into the checkout: prefer the wheel)
#   VENV=/path/venv CI_OFFLINE=1 ./ci.sh
#                       a virtualenv that already holds t9k-jobs and the dev tools: only this
#                       plugin is installed, without the network (no dependencies, no build
#                       isolation: the venv's own setuptools builds it, 64 or later)
#
# Rename PLUGIN and PACKAGE with the rest of the template.
set -euo pipefail
cd "$(dirname "$0")"

PLUGIN=mpijob          # the entry-point name in the group t9kjobs.plugins
PACKAGE=t9kjobs_mpijob # the import package
VENV=${VENV:-.venv}
T9KJOBS=${T9KJOBS:-}
PY="$VENV/bin/python"

step() { printf '\n== %s\n' "$*"; }

if [[ ! -x "$PY" ]]; then
    step "virtualenv $VENV"
    python3 -m venv "$VENV"
fi
if [[ -n "${CI_OFFLINE:-}" ]]; then
    step "install $PACKAGE (offline, beside the t9k-jobs already in $VENV)"
    "$PY" -c 'import t9kjobs' || { echo "t9k-jobs is not installed in $VENV" >&2; exit 1; }
    # setuptools before 70.1 builds wheels (an editable install is one) only with the `wheel`
    # package, which a plain virtualenv lacks (Python 3.11 brings setuptools 65.5 and no
    # wheel): there, setuptools' develop mode links the package instead.
    if "$PY" -c 'import wheel' 2>/dev/null || "$PY" -c '
import setuptools, sys
sys.exit(tuple(int(p) for p in setuptools.__version__.split(".")[:2]) < (70, 1))'; then
        "$PY" -m pip install --quiet --no-deps --no-build-isolation --no-index -e .
    else
        "$PY" -c 'from setuptools import setup; setup()' --quiet develop --no-deps
    fi
else
    if [[ -z "$T9KJOBS" ]]; then
        echo "T9KJOBS is not set: t9k-jobs is not on PyPI; give its wheel (make dist in a" \
            "t9k-jobs checkout), or a requirement your package index serves" >&2
        exit 2
    fi
    step "install t9k-jobs ($T9KJOBS) and $PACKAGE"
    "$PY" -m pip install --quiet --upgrade pip
    "$PY" -m pip install --quiet "$T9KJOBS"
    "$PY" -m pip install --quiet -e '.[dev]'
fi

# Whatever installed $PACKAGE into this virtualenv before (a develop or editable install of
# another copy, say a broken copy you were trying) may be the one Python imports: then every
# step below would check that copy, not this one. Refuse rather than test the wrong code.
step "check that $PACKAGE imports from here"
where=$("$PY" -c "import os, $PACKAGE; print(os.path.dirname(os.path.realpath($PACKAGE.__file__)))")
if [[ "$where" != "$(pwd -P)/$PACKAGE" ]]; then
    echo "$PACKAGE imports from $where, not from $(pwd -P)/$PACKAGE: another install shadows" \
        "this copy; '$PY -m pip uninstall $PACKAGE' (or use a virtualenv of its own)" >&2
    exit 1
fi

step "ruff"
"$PY" -m ruff check .
"$PY" -m ruff format --check .

step "mypy --strict"
"$PY" -m mypy --strict "$PACKAGE" tests

step "the plugin's tests"
"$PY" -m pytest -q tests

step "the conformance kit"
"$PY" -m pytest -q -p t9kjobs-conformance --t9kjobs-conformance="$PLUGIN" --t9kjobs-examples=examples

step "ok: $PLUGIN passes"
