# t9k-jobs. `make demo` runs the product end to end; `make test` runs every test tier.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

include hack/cluster/cluster.mk

.PHONY: venv dist plugin-api test unit lint typecheck layers layout check crds tools conformance plugin-guide bench bench-scale bench-progress bench-recovery bench-admission bench-tas soak chaos demo demo-sim mutate clean

# EDITABLE_MODE=strict: t9kjobs as a folder of links that type checkers read (a plugin's
# `mypy --strict` against this tree, docs/conformance.md); new modules then need `make venv`.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip "setuptools>=77"
	$(BIN)/pip install --quiet -e '.[dev]' $(if $(EDITABLE_MODE),--config-settings editable_mode=$(EDITABLE_MODE))
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check core plugins tests hack bench
	$(BIN)/ruff format --check core plugins tests hack bench

# mypy and import-linter read one folder per package; assemble the installed layout (core/ is
# t9kjobs, plugins/ is t9kjobs.plugins) in build/layout and check it there.
LAYOUT := build/layout
layout:
	rm -rf $(LAYOUT) && mkdir -p $(LAYOUT)
	cp -r core $(LAYOUT)/t9kjobs && cp -r plugins $(LAYOUT)/t9kjobs/plugins

typecheck: $(STAMP) layout
	cd $(LAYOUT) && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p t9kjobs

layers: $(STAMP) layout
	cd $(LAYOUT) && PYTHONPATH=. ../../$(BIN)/lint-imports --config ../../.importlinter --no-cache

unit: $(STAMP)
	$(BIN)/pytest tests/unit

check: lint typecheck layers

# Regenerate crds/ from the models, and the tables of docs/api.md from crds/ (unit tests fail
# while either is stale).
crds: $(STAMP)
	$(BIN)/t9kjobs crds --output-dir crds
	$(BIN)/python hack/sync_chart_crds.py
	$(BIN)/python hack/gen_api_doc.py

# helm and hadolint into ~/.cache/t9kjobs/bin/tools (the unit tests install them when missing).
tools:
	@bash hack/install-tools.sh

# The conformance kit on the bundled plugins, on the template plugin and on the feature plugin
# (a PodDisruptionBudget per job), each installed beside the project the way a third party's
# would be (into build/, so it stays out of crds/; a PYTHONPATH of the caller's stays after
# it: a worktree's own tree). Its
# admission tier starts etcd and kube-apiserver of the local control plane (built first when
# missing; docs/conformance.md).
PLUGIN_TEMPLATE := build/plugin-template
FEATURE_PLUGIN := build/feature-plugin
conformance: export T9KJOBS_BIN_DIR = $(shell bash hack/cluster/build.sh)
conformance: $(STAMP)
	$(BIN)/pytest -p t9kjobs-conformance --t9kjobs-conformance=generic,pytorch,deepspeed,colossalai --t9kjobs-examples=examples
	rm -rf $(PLUGIN_TEMPLATE) && $(BIN)/pip install --quiet --no-build-isolation --no-deps --target $(PLUGIN_TEMPLATE) ./examples/plugin-template
	rm -rf examples/plugin-template/build examples/plugin-template/*.egg-info
	PYTHONPATH=$(PLUGIN_TEMPLATE)$(PYTHONPATH:%=:%) $(BIN)/pytest -p t9kjobs-conformance --t9kjobs-conformance=mpijob --t9kjobs-examples=examples/plugin-template/examples
	PYTHONPATH=$(PLUGIN_TEMPLATE)$(PYTHONPATH:%=:%) $(BIN)/t9kjobs render examples/plugin-template/examples/pi.yaml | grep -q '^  name: mpi-pi-launcher$$'
	PYTHONPATH=$(PLUGIN_TEMPLATE)$(PYTHONPATH:%=:%) $(BIN)/t9kjobs crds --stdout | grep -q '^  name: mpijobs.batch.tensorstack.dev$$'
	rm -rf $(FEATURE_PLUGIN) && $(BIN)/pip install --quiet --no-build-isolation --no-deps --target $(FEATURE_PLUGIN) ./examples/feature-plugin
	rm -rf examples/feature-plugin/build examples/feature-plugin/*.egg-info
	PYTHONPATH=$(FEATURE_PLUGIN)$(PYTHONPATH:%=:%) $(BIN)/pytest -p t9kjobs-conformance --t9kjobs-conformance=pdb --t9kjobs-examples=examples/feature-plugin/examples
	PYTHONPATH=$(FEATURE_PLUGIN)$(PYTHONPATH:%=:%) $(BIN)/t9kjobs render --pdb-min-available=2 examples/feature-plugin/examples/mlp.yaml | grep -q '^  minAvailable: 2$$'

# The scale benchmark (docs/benchmarks.md); not part of `make test`. BENCH_ARGS="--jobs 20" for
# a small run.
bench: $(STAMP)
	$(BIN)/pip install --quiet -r bench/requirements.txt
	$(BIN)/python -m bench $(BENCH_ARGS)

# The scale and steady-state series (docs/benchmarks.md): 2,000 / 5,000 / 10,000 jobs x 4 pods,
# ours and the training operator (10 min limit), then Poisson arrivals at 50% and 80% of the
# capacity measured at 2,000; hours on 2 cores, never in CI. Under the shared lock.
# SERIES_ARGS="--sizes 2000 --steady 0.5" for a part; results in build/bench-scale/.
bench-scale: $(STAMP)
	$(BIN)/pip install --quiet -r bench/requirements.txt
	$(BIN)/python -m bench.series --out build/bench-scale $(SERIES_ARGS)

# Mutation testing of the planner and the plugins against the unit tier (docs/testing.md);
# not part of `make test`. A full run rewrites the scores in docs/testing.md and uses every
# core: run it under the shared lock. MUTATE_ARGS="plugins/pytorch/torchrun.py" for one module.
mutate: $(STAMP)
	$(BIN)/python hack/mutate.py $(MUTATE_ARGS)

# The soak (docs/reliability.md): 2,000 jobs created and deleted in waves, the operator's RSS
# after each; about 15 min, not part of `make test`. SOAK_ARGS="--jobs 200 --waves 4" for less.
soak: $(STAMP)
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

# What reading training progress costs at 500 running jobs on KWOK (docs/benchmarks.md, "The
# cost of progress"): with progress read (the defaults), then without (--progress-qps=0).
bench-progress: $(STAMP)
	$(BIN)/python -m bench.progress $(PROGRESS_ARGS)
	$(BIN)/python -m bench.progress --ours-arg=--progress-qps=0 $(PROGRESS_ARGS)

# Lost nodes on KWOK (docs/benchmarks.md, "Recovery"): a node under a running job made
# unreachable, NotReady or deleted, N times each; the time until the job's pod runs elsewhere
# (min / median / max). About 5 min, never in CI. RECOVERY_ARGS="--repetitions 3" for less.
bench-recovery: $(STAMP)
	$(BIN)/python -m bench.recovery $(RECOVERY_ARGS)

# What the admission webhook costs a create (docs/benchmarks.md, "The cost of admission"): the
# same 300 jobs created on one KWOK cluster without and with the webhook registered; latency
# and CPU a create. About 3 min, never in CI. ADMISSION_ARGS="--in-flight 8" for a burst.
bench-admission: $(STAMP)
	$(BIN)/python -m bench.admission_cost $(ADMISSION_ARGS)

# What Kueue's Topology-Aware Scheduling costs a job (docs/benchmarks.md, "The cost of
# topology-aware placement"): the same jobs queued without and with a Topology on one KWOK
# cluster with Kueue; requests and time to placement a job. Never in CI.
bench-tas: $(STAMP)
	$(BIN)/python -m bench.tas_cost $(TAS_ARGS)

# The chaos tier at full size (docs/reliability.md): 200 jobs while the operator's two replicas
# are killed 3 times and frozen twice and kube-apiserver restarted once. `make test` runs it
# small (27 jobs, one fault of each). Report in build/chaos/.
CHAOS_JOBS ?= 200
CHAOS_KILLS ?= 3
CHAOS_FREEZES ?= 2
CHAOS_APISERVER_RESTARTS ?= 1
chaos: $(STAMP)
	CHAOS_JOBS=$(CHAOS_JOBS) CHAOS_KILLS=$(CHAOS_KILLS) CHAOS_FREEZES=$(CHAOS_FREEZES) \
		CHAOS_APISERVER_RESTARTS=$(CHAOS_APISERVER_RESTARTS) $(BIN)/pytest -s tests/chaos

# The sdist and the wheel of t9k-jobs into dist/ (hack/dist.py: built from a copy, offline).
# The sdist and the wheel into dist/. It needs setuptools 77 or later (pyproject's build
# requirement), not the dev environment: the project venv's Python when there is one, else a
# virtualenv of its own holding setuptools alone (build/dist-venv, made once). Without make:
# `python -m build` (docs/plugin-guide.md, "Test and ship it").
DIST_VENV := build/dist-venv
dist:
	@if [ -x $(BIN)/python ]; then py=$(BIN)/python; else py=$(DIST_VENV)/bin/python; \
		[ -x $$py ] || { $(PYTHON) -m venv $(DIST_VENV) && $(DIST_VENV)/bin/pip install --quiet "setuptools>=77"; }; fi; \
		$$py hack/dist.py

# Regenerate docs/plugin-api.txt, the surface plugins may rely on (a unit test fails while stale).
plugin-api: $(STAMP)
	$(BIN)/python hack/gen_plugin_api.py

# Regenerate docs/plugin-reference.md and the generated parts of docs/plugin-guide.md.
plugin-guide: $(STAMP)
	$(BIN)/python hack/gen_plugin_guide.py

# Every tier: static checks, unit tests, the conformance kit, the fuzz tier, end-to-end tests on
# the local cluster.
# From empty caches, the real node's builds run in the background meanwhile (hack/prebuild.sh).
test: $(STAMP)
	bash hack/prebuild.sh start
	@start=$$SECONDS; $(MAKE) --no-print-directory check conformance || { bash hack/prebuild.sh stop; exit 1; }; \
		echo "[make test] static checks and the conformance kit: $$((SECONDS - start)) s (pytest's tiers: its \"time per tier\" at the end)"
	$(BIN)/pytest tests || { bash hack/prebuild.sh stop; exit 1; }
	bash hack/prebuild.sh stop

# A local control plane with a real node, the operator, one job of every kind training for real.
demo: $(STAMP)
	$(BIN)/python hack/demo.py

# The same on KWOK nodes, with simulated pods (seconds, once the control plane is built).
demo-sim: $(STAMP)
	$(BIN)/python hack/demo.py --sim

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
