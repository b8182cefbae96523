"""The `t9kjobs` command as a user runs it: exit codes, messages, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.repo import REPO
from tests.unit.core.cli.running_cli import run

EXAMPLE = REPO / "examples" / "genericjob" / "torch-ddp.yaml"


def test_plugins_lists_the_bundled_plugins_from_their_entry_points() -> None:
    out = run("plugins")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines()[1:]}
    assert "GenericJob" in rows["generic"] and "t9k-jobs" in rows["generic"]


def test_plugins_names_the_kinds_as_kueues_external_frameworks() -> None:
    out = run("plugins", "--kueue-frameworks")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().split(",") == [
        f"{kind}.v1beta1.batch.tensorstack.dev"
        for kind in ("ColossalAIJob", "DeepSpeedJob", "GenericJob", "PyTorchTrainingJob")
    ]


def test_render_yaml_and_json_agree() -> None:
    as_yaml = run("render", str(EXAMPLE))
    as_json = run("render", str(EXAMPLE), "-o", "json")
    assert as_yaml.returncode == 0 and as_json.returncode == 0, as_yaml.stderr + as_json.stderr
    assert list(yaml.safe_load_all(as_yaml.stdout)) == json.loads(as_json.stdout)


def test_validate_valid_file() -> None:
    out = run("validate", str(EXAMPLE))
    assert out.returncode == 0
    assert "GenericJob generic-ddp is valid" in out.stdout


def test_validate_reports_each_problem_with_its_path(tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["replicaSpecs"][1]["replicas"] = -1
    doc["spec"]["cleanUpPolicy"] = "Sometimes"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    out = run("validate", str(bad))
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert f"{bad}: spec.replicaSpecs[1].replicas: must be >= 0" in lines
    assert any(line.startswith(f"{bad}: spec.cleanUpPolicy:") for line in lines)
    assert "Traceback" not in out.stderr


def test_unknown_kind_malformed_yaml_and_missing_file(tmp_path: Path) -> None:
    unknown = run(
        "validate",
        "-",
        stdin="apiVersion: batch.tensorstack.dev/v1beta1\nkind: NoSuchJob\nmetadata: {name: a}\nspec: {}\n",
    )
    assert unknown.returncode == 1 and "unknown kind 'NoSuchJob'" in unknown.stderr
    malformed = run("validate", "-", stdin="kind: [unclosed\n")
    assert malformed.returncode == 1 and "malformed YAML" in malformed.stderr
    missing = run("render", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "No such file" in missing.stderr
    for out in (unknown, malformed, missing):
        assert "Traceback" not in out.stderr


def test_a_blocked_plugin_is_not_loaded() -> None:
    out = run("--block-plugin", "generic", "plugins")
    assert out.returncode == 0
    assert "generic" not in out.stdout
