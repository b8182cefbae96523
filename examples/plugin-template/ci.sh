#!/usr/bin/env bash
# CI of this plugin: a virtualenv with t9k-jobs and the plugin, then lint, types, the plugin's
# own tests and the t9k-jobs conformance kit. Exits non-zero at the first failure.
#
#   ./ci.sh                                 a fresh .venv; t9k-jobs from the package index
#   T9KJOBS=../t9k-jobs ./ci.sh             t9k-jobs from a checkout (any pip requirement works)
#   VENV=/path/venv CI_OFFLINE=1 ./ci.sh    a virtualenv that already holds t9k-jobs and the dev
#                                           tools: only this plugin is installed, without the
#                                           network (no dependencies, no build isolation)
#
# Rename PLUGIN and PACKAGE with the rest of the template.
set -euo pipefail
cd "$(dirname "$0")"

PLUGIN=mpijob          # the entry-point name in the group t9kjobs.plugins
PACKAGE=t9kjobs_mpijob # the import package
VENV=${VENV:-.venv}
T9KJOBS=${T9KJOBS:-t9k-jobs>=0.1,<0.2}
PY="$VENV/bin/python"

step() { printf '\n== %s\n' "$*"; }

if [[ ! -x "$PY" ]]; then
    step "virtualenv $VENV"
    python3 -m venv "$VENV"
fi
if [[ -n "${CI_OFFLINE:-}" ]]; then
    step "install $PACKAGE (offline, beside the t9k-jobs already in $VENV)"
    "$PY" -c 'import t9kjobs' || { echo "t9k-jobs is not installed in $VENV" >&2; exit 1; }
    "$PY" -m pip install --quiet --no-deps --no-build-isolation --no-index -e .
else
    step "install t9k-jobs ($T9KJOBS) and $PACKAGE"
    "$PY" -m pip install --quiet --upgrade pip
    "$PY" -m pip install --quiet "$T9KJOBS"
    "$PY" -m pip install --quiet -e '.[dev]'
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
