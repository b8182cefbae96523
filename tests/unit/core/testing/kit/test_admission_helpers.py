"""The admission tier's reading of the API server: schema paths, refusals, pruned fields."""

from __future__ import annotations

from t9kjobs.testing.kit.admission import DryRun, field_of_schema_path, pruned_fields, refusal_names


def test_a_schema_path_reads_as_the_jobs_field_path() -> None:
    path = ".properties[spec].properties[replicaSpecs].items.properties[template]"
    assert field_of_schema_path(path) == "spec.replicaSpecs[*].template"
    assert field_of_schema_path(".properties[spec].properties[env].additionalProperties") == (
        "spec.env.*"
    )
    assert field_of_schema_path("") == "<root>"


def test_a_refusal_names_a_path_only_as_a_whole() -> None:
    refused = DryRun(False, 'X "a" is invalid:\n* spec.worker.replicas: Invalid value: 0')
    assert refusal_names(refused, ("spec.worker.replicas",)) == []
    # A path inside the named one, or one that merely starts like it, is not named.
    assert refusal_names(refused, ("spec.worker",)) == ["spec.worker"]
    assert refusal_names(refused, ("spec.worker.replica",)) == ["spec.worker.replica"]
    assert refusal_names(DryRun(True, ""), ("spec",)) == ["spec"]


def test_pruned_fields_are_those_the_server_dropped() -> None:
    sent = {"a": 1, "b": {"c": 2, "d": None}, "e": [{"f": 1}, {"g": 2}]}
    stored = {"a": 1, "b": {}, "e": [{"f": 1}, {}], "defaulted": True}
    assert pruned_fields(sent, stored, "spec") == ["spec.b.c", "spec.e[1].g"]
