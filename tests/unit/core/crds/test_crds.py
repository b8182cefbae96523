"""The generated CRDs: structural schemas, every alias spelling, the CEL rules, and `crds/` fresh.

The API server's own verdict on these CRDs (and on jobs checked against them) is in
tests/e2e/test_crds_admission.py; here the schema is checked without a cluster.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from t9kjobs.cli.main import main
from t9kjobs.crds import RULE_LIST_MAX_ITEMS, CrdError, crd_filename, crd_for, crds, openapi_schema
from t9kjobs.kinds import KindInfo
from t9kjobs.loading import JobError, load_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import ApiModel, JobSpec, JobStatus, ReplicaSpec
from t9kjobs.models._base import field_spellings
from t9kjobs.vocabulary import Obj
from tests.repo import REPO

CRDS_DIR = REPO / "crds"
BUNDLED_DISTRIBUTION = "t9k-jobs"


# -- helpers ---------------------------------------------------------------------------------


def spec_schema(crd: Obj) -> Any:
    return root_schema(crd)["properties"]["spec"]


def root_schema(crd: Obj) -> Any:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def nodes(node: Obj, path: str = "") -> Iterator[tuple[str, Obj]]:
    """Every schema node under `node` with its path (`a.b[].c{}`)."""
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from nodes(node["additionalProperties"], f"{path}{{}}")


def structural_problems(schema: Obj) -> list[str]:
    """What makes a schema non-structural (or refused by the API server), node by node."""
    problems = []
    for path, node in nodes(schema):
        where = path or "<root>"
        for key in ("$ref", "$defs", "title", "allOf", "const", "uniqueItems", "prefixItems"):
            if key in node:
                problems.append(f"{where}: has {key}")
        for key in ("anyOf", "oneOf"):
            kinds = {m.get("type") for m in node.get(key, [])}
            if len(kinds) > 1 or "null" in kinds:
                problems.append(f"{where}: {key} with types {sorted(map(str, kinds))}")
        typed = "type" in node
        untyped_ok = node.get("x-kubernetes-int-or-string") or node.get(
            "x-kubernetes-preserve-unknown-fields"
        )
        if not typed and not untyped_ok:
            problems.append(f"{where}: no type")
        if node.get("type") not in (
            None,
            "object",
            "array",
            "string",
            "integer",
            "number",
            "boolean",
        ):
            problems.append(f"{where}: type {node.get('type')!r}")
        if node.get("x-kubernetes-int-or-string") and node.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            problems.append(f"{where}: int-or-string and preserve-unknown-fields together")
        if "additionalProperties" in node:
            if "properties" in node:
                problems.append(f"{where}: additionalProperties with properties")
            if not isinstance(node["additionalProperties"], dict):
                problems.append(f"{where}: additionalProperties is not a schema")
        if node.get("type") == "array" and not isinstance(node.get("items"), dict):
            problems.append(f"{where}: array without items")
        if node.get("x-kubernetes-validations") and not (
            typed or node.get("x-kubernetes-int-or-string")
        ):
            problems.append(f"{where}: CEL rules on a typeless node never compile")
        for rule in node.get("x-kubernetes-validations", []):
            if not rule.get("rule") or not rule.get("message"):
                problems.append(f"{where}: a CEL rule without rule or message: {rule}")
        if node.get("exclusiveMinimum") not in (None, True, False):
            problems.append(f"{where}: numeric exclusiveMinimum")
        if "default" in node and node["default"] is None:
            problems.append(f"{where}: null default")
        if node.get("nullable"):
            problems.append(f"{where}: nullable (the API server would keep a null, not prune it)")
        if "enum" in node and None in node["enum"]:
            problems.append(f"{where}: null in an enum (the API server refuses a null there)")
    return problems


def _field_models(annotation: Any, node: Obj) -> Iterator[tuple[type[BaseModel], Obj]]:
    """The models an annotation holds, each with its node in the schema."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, node
    elif origin is typing.Annotated:
        yield from _field_models(args[0], node)
    elif origin in (typing.Union, types.UnionType):
        for arg in args:
            yield from _field_models(arg, node)
    elif origin is list and args:
        yield from _field_models(args[0], node.get("items", {}))
    elif origin is dict and len(args) == 2:
        yield from _field_models(args[1], node.get("additionalProperties", {}))


def model_nodes(model: type[BaseModel], node: Obj) -> Iterator[tuple[type[BaseModel], Obj]]:
    """Every model reachable from `model`, with the schema node it is rendered as."""
    yield model, node
    props = node.get("properties", {})
    for name, info in model.model_fields.items():
        wire = field_spellings(name, info)[0]
        if wire in props:
            for sub, sub_node in _field_models(info.annotation, props[wire]):
                yield from model_nodes(sub, sub_node)


def rules(node: Obj) -> list[str]:
    return [r["rule"] for r in node.get("x-kubernetes-validations", [])]


@pytest.fixture(scope="module")
def all_crds(manager: PluginManager) -> dict[str, Obj]:
    return {kind: crd_for(info) for kind, info in manager.kinds.items()}


# -- structure -------------------------------------------------------------------------------


def test_the_four_bundled_kinds_are_served(manager: PluginManager) -> None:
    assert {"GenericJob", "DeepSpeedJob", "ColossalAIJob", "PyTorchTrainingJob"} <= set(
        manager.kinds
    )


def test_every_schema_is_structural(all_crds: dict[str, Obj]) -> None:
    problems = [
        f"{kind}: {p}"
        for kind, crd in all_crds.items()
        for p in structural_problems(root_schema(crd))
    ]
    assert problems == []


def test_the_checker_finds_what_is_not_structural() -> None:
    bad = {
        "type": "object",
        "title": "X",
        "properties": {
            "a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "b": {"$ref": "#/$defs/B"},
            "c": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
            "d": {"type": "array"},
            "e": {"x-kubernetes-preserve-unknown-fields": True, "x-kubernetes-validations": [{}]},
        },
    }
    found = structural_problems(bad)
    assert any("<root>: has title" in p for p in found)
    assert any(".a: anyOf" in p for p in found)
    assert any(".a: no type" in p for p in found)
    assert any(".b: has $ref" in p for p in found)
    assert any(".c: additionalProperties with properties" in p for p in found)
    assert any(".d: array without items" in p for p in found)
    assert any(".e: CEL rules on a typeless node" in p for p in found)


def test_metadata_is_only_an_object(all_crds: dict[str, Obj]) -> None:
    for crd in all_crds.values():
        root = root_schema(crd)
        assert root["properties"]["metadata"] == {"type": "object"}
        assert root["required"] == ["spec"]


def test_property_names_are_the_wire_spelling(all_crds: dict[str, Obj]) -> None:
    # pydantic's to_camel spells t9k_scheduler `t9KScheduler`; the API spells `t9kScheduler`.
    for kind, crd in all_crds.items():
        for path, _ in nodes(root_schema(crd)):
            name = path.rsplit(".", 1)[-1].rstrip("[]{}")
            assert not re.search(r"[0-9][A-Z]", name), f"{kind}{path}"
    scheduler = spec_schema(all_crds["GenericJob"])["properties"]["scheduler"]
    assert list(scheduler["properties"]) == ["t9kScheduler"]


def test_every_spec_field_is_described(all_crds: dict[str, Obj]) -> None:
    # `kubectl explain <kind>.spec...` prints these.
    missing = [
        f"{kind}.spec{path}"
        for kind, crd in all_crds.items()
        for path, node in nodes(spec_schema(crd))
        if path and not path.endswith(("[]", "{}")) and not node.get("description")
    ]
    assert missing == []


def test_the_status_schema_is_the_status_model(
    manager: PluginManager, all_crds: dict[str, Obj]
) -> None:
    for kind, crd in all_crds.items():
        status = dict(root_schema(crd)["properties"]["status"])
        expected = openapi_schema(manager.kinds[kind].status_model)
        assert status.pop("description").startswith(f"The observed state of the {kind}")
        expected.pop("description", None)
        assert status == expected
        assert "x-kubernetes-preserve-unknown-fields" not in status


# -- encodings of the model types ------------------------------------------------------------


def test_restart_policy_string_or_object_encoding(all_crds: dict[str, Obj]) -> None:
    replica = spec_schema(all_crds["GenericJob"])["properties"]["replicaSpecs"]["items"]
    policy = replica["properties"]["restartPolicy"]
    assert "type" not in policy
    assert policy["x-kubernetes-preserve-unknown-fields"] is True
    # `pattern` binds strings only, `properties` objects only.
    assert policy["pattern"] == "^(Always|OnFailure|Never|ExitCode)$"
    assert policy["properties"]["policy"]["enum"] == ["Always", "OnFailure", "Never", "ExitCode"]
    assert policy["properties"]["limit"]["minimum"] == 0
    assert policy["maxProperties"] == 2  # an unknown key in the object form is one too many
    assert policy["default"] == "OnFailure"
    assert re.fullmatch(policy["pattern"], "ExitCode")
    assert not re.fullmatch(policy["pattern"], "Sometimes")


def test_int_or_string_nullable_and_dict_encodings(all_crds: dict[str, Obj]) -> None:
    spec = spec_schema(all_crds["GenericJob"])["properties"]
    port = spec["service"]["properties"]["ports"]["items"]["properties"]
    assert port["targetPort"] == {
        "description": port["targetPort"]["description"],
        "x-kubernetes-int-or-string": True,
    }
    assert port["port"]["minimum"] == 1 and port["port"]["maximum"] == 65535
    # Optional, not nullable: the API server prunes an explicit null (null means absent).
    assert "nullable" not in spec["service"] and "service" not in spec.get("required", [])
    rule = spec["successRules"]["items"]
    assert rule["type"] == "object"
    assert rule["additionalProperties"] == {
        "type": "array",
        "maxItems": 1000,
        "items": {"type": "integer", "minimum": 0, "maximum": 1000},
    }
    # A pod template keeps every field, and types those the operator reads.
    template = spec["replicaSpecs"]["items"]["properties"]["template"]
    assert template["type"] == "object"
    assert template["x-kubernetes-preserve-unknown-fields"] is True
    pod_spec = template["properties"]["spec"]
    assert pod_spec["x-kubernetes-preserve-unknown-fields"] is True
    container = pod_spec["properties"]["containers"]["items"]
    assert container["required"] == ["name", "image"]
    assert container["properties"]["command"]["items"] == {"type": "string"}


def test_enums_minimums_and_defaults(all_crds: dict[str, Obj]) -> None:
    spec = spec_schema(all_crds["GenericJob"])["properties"]
    assert spec["cleanUpPolicy"]["enum"] == ["All", "Unfinished", "None"]
    assert spec["cleanUpPolicy"]["default"] == "None"
    scheduler = spec["scheduler"]["properties"]["t9kScheduler"]["properties"]
    assert (scheduler["priority"]["minimum"], scheduler["priority"]["maximum"]) == (0, 100)
    assert scheduler["priority"]["default"] == 0
    replicas = spec["replicaSpecs"]["items"]["properties"]["replicas"]
    assert (replicas["minimum"], replicas["default"]) == (0, 1)
    phase = root_schema(all_crds["GenericJob"])["properties"]["status"]["properties"]["phase"]
    assert "nullable" not in phase and None not in phase["enum"]


# -- aliases ---------------------------------------------------------------------------------


def test_every_alias_spelling_is_a_property(
    manager: PluginManager, all_crds: dict[str, Obj]
) -> None:
    seen = 0
    for kind, info in manager.kinds.items():
        for model, node in model_nodes(info.spec_model, spec_schema(all_crds[kind])):
            props = node.get("properties", {})
            for name, field in model.model_fields.items():
                names = field_spellings(name, field)
                if len(names) < 2:
                    continue
                seen += 1
                where = f"{kind} {model.__name__}.{name}"
                assert all(n in props for n in names), where
                first = {k: v for k, v in props[names[0]].items() if k != "description"}
                for other in names[1:]:
                    assert {k: v for k, v in props[other].items() if k != "description"} == first
                    assert props[other]["description"].startswith(f"Alias of `{names[0]}`.")
                # A default on one spelling would override the other one the user wrote.
                assert all("default" not in props[n] for n in names), where
                assert not set(names) & set(node.get("required", [])), where
                both = f"!(has(self.{names[0]}) && has(self.{names[1]}))"
                assert any(r.startswith(both) for r in rules(node)), where
                if field.is_required():
                    assert " || ".join(f"has(self.{n})" for n in names) in rules(node), where
    assert seen >= 5  # enabled x3, queue, and the plugins' own


def test_queue_alias_is_required_by_a_rule(all_crds: dict[str, Obj]) -> None:
    t9k = spec_schema(all_crds["GenericJob"])["properties"]["scheduler"]["properties"][
        "t9kScheduler"
    ]
    assert set(t9k["properties"]) == {"queue", "Queue", "priority"}
    assert "required" not in t9k
    required = next(r for r in t9k["x-kubernetes-validations"] if r["rule"].startswith("has("))
    assert required == {
        "rule": "has(self.queue) || has(self.Queue)",
        "message": "`queue` or `Queue` is required",
        "fieldPath": ".queue",
        "reason": "FieldValueRequired",
    }


# -- CEL rules -------------------------------------------------------------------------------


def _rules_in(extra: Any) -> list[str]:
    """The CEL rules of a `json_schema_extra` (a model's or a field's)."""
    if not isinstance(extra, dict):
        return []
    return [r["rule"] for r in extra.get("x-kubernetes-validations", [])]


def test_rules_declared_on_models_are_copied(
    manager: PluginManager, all_crds: dict[str, Obj]
) -> None:
    copied = 0
    for kind, info in manager.kinds.items():
        for model, node in model_nodes(info.spec_model, spec_schema(all_crds[kind])):
            for rule in _rules_in(model.model_config.get("json_schema_extra")):
                assert rule in rules(node), f"{kind} {model.__name__}: {rule}"
                copied += 1
            for name, field in model.model_fields.items():
                for rule in _rules_in(field.json_schema_extra):
                    prop = node["properties"][field_spellings(name, field)[0]]
                    assert rule in rules(prop), f"{kind} {model.__name__}.{name}"
                    copied += 1
    assert copied >= 6


def test_generic_replica_types_are_unique_and_bounded(all_crds: dict[str, Obj]) -> None:
    specs = spec_schema(all_crds["GenericJob"])["properties"]["replicaSpecs"]
    assert specs["maxItems"] == 32 and specs["minItems"] == 1
    assert rules(specs) == [
        "self.all(x, self.exists_one(y, y.type == x.type))",
        "self.map(x, has(x.replicas) ? x.replicas : 1).sum() <= 1000",
    ]


def test_elastic_rules_on_every_kind_with_elastic(all_crds: dict[str, Obj]) -> None:
    with_elastic = {
        kind: spec_schema(crd)["properties"]["elastic"]
        for kind, crd in all_crds.items()
        if "elastic" in spec_schema(crd)["properties"]
    }
    assert {"DeepSpeedJob", "PyTorchTrainingJob"} <= set(with_elastic)
    for kind, elastic in with_elastic.items():
        found = " ".join(rules(elastic))
        assert "self.minReplicas <= self.maxReplicas" in found, kind
        assert "self.minReplicas <= self.expectedReplicas" in found, kind
        assert "self.expectedReplicas <= self.maxReplicas" in found, kind
        assert "self.minReplicas == oldSelf.minReplicas" in found, kind
        assert "self.maxReplicas == oldSelf.maxReplicas" in found, kind


def test_resume_specs_are_frozen_while_paused(all_crds: dict[str, Obj]) -> None:
    for kind, crd in all_crds.items():
        run_mode = spec_schema(crd)["properties"].get("runMode")
        if run_mode is None:
            continue
        pause = run_mode["properties"]["pause"]
        frozen = [r for r in rules(pause) if "oldSelf.resumeSpecs" in r]
        assert len(frozen) == 1, kind
        # The rule compares the list: its cost is bounded by maxItems.
        assert pause["properties"]["resumeSpecs"]["maxItems"] == RULE_LIST_MAX_ITEMS, kind


def test_lists_a_rule_iterates_get_max_items() -> None:
    class Item(ApiModel):
        name: str = Field(description="Name.")

    class Spec(JobSpec):
        model_config = JobSpec.model_config | ConfigDict(
            json_schema_extra={
                "x-kubernetes-validations": [
                    {"rule": "self.items.all(i, i.name != '')", "message": "m"},
                    {
                        "rule": "has(self.tags) && self.args[0] != '' && self.args.size() > 0",
                        "message": "m",
                    },
                ]
            }
        )
        items: list[Item] = Field(default_factory=list, description="Items.")
        bounded: list[Item] = Field(default_factory=list, max_length=4, description="B.")
        tags: list[str] = Field(default_factory=list, description="Tags.")
        args: list[str] = Field(default_factory=list, description="Args.")

    props = openapi_schema(Spec)["properties"]
    assert props["items"]["maxItems"] == RULE_LIST_MAX_ITEMS
    assert props["bounded"]["maxItems"] == 4
    # Presence tests, indexing and size() cost the same whatever the length.
    assert "maxItems" not in props["tags"]
    assert "maxItems" not in props["args"]


# -- the pydantic side agrees ----------------------------------------------------------------

GENERIC = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata: {name: j}
spec:
  replicaSpecs:
    - type: worker
      template: {spec: {containers: [{name: c, image: busybox}]}}
"""


def _generic(**spec: Any) -> Obj:
    doc: Obj = yaml.safe_load(GENERIC)
    doc["spec"].update(spec)
    return doc


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"scheduler": {"t9kScheduler": {"queue": "q", "priority": 101}}}, "must be <= 100"),
        ({"scheduler": {"t9kScheduler": {"queue": "q", "Queue": "q"}}}, "spellings of one field"),
        ({"runMode": {"debug": {"enable": True, "enabled": True}}}, "spellings of one field"),
        (
            {"replicaSpecs": [{"type": "a"}] * 2},
            "replica types must be unique",
        ),
        ({"replicaSpecs": [{"type": f"t{i}"} for i in range(33)]}, "at most 32"),
        (
            {"replicaSpecs": [{"type": "a", "restartPolicy": "Sometimes"}]},
            "one of `Always`, `OnFailure`, `Never` or `ExitCode`",
        ),
        ({"cleanUpPolicy": "Some"}, "one of `All`, `Unfinished` or `None`"),
    ],
)
def test_validate_refuses_what_admission_refuses(
    manager: PluginManager, spec: Obj, message: str
) -> None:
    with pytest.raises(JobError) as err:
        load_job(_generic(**spec), manager)
    assert message in str(err.value)


def test_validate_accepts_either_spelling(manager: PluginManager) -> None:
    job, _ = load_job(
        _generic(scheduler={"t9kScheduler": {"Queue": "q"}}, runMode={"pause": {"enable": True}}),
        manager,
    )
    lifecycle = job.spec.lifecycle()
    assert lifecycle.run_mode.paused
    assert lifecycle.scheduler is not None and lifecycle.scheduler.t9k_scheduler is not None
    assert lifecycle.scheduler.t9k_scheduler.queue == "q"


@pytest.mark.parametrize(
    ("elastic", "message"),
    [
        ({"minReplicas": 4, "maxReplicas": 2}, "minReplicas (4) must be <= maxReplicas (2)"),
        ({"minReplicas": 2, "expectedReplicas": 1}, "expectedReplicas (1) must be >= minReplicas"),
        ({"maxReplicas": 2, "expectedReplicas": 3}, "expectedReplicas (3) must be <= maxReplicas"),
    ],
)
def test_elastic_bounds_are_validated(elastic: Obj, message: str) -> None:
    from t9kjobs.models import ElasticConfig

    with pytest.raises(ValueError, match=re.escape(message)):
        ElasticConfig.model_validate(elastic)


def _walk(node: Obj, path: str = "") -> Iterator[tuple[str, Obj]]:
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from _walk(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from _walk(node[key], f"{path}[]")


def test_every_field_says_its_values_and_default_for_kubectl_explain(
    all_crds: dict[str, Obj],
) -> None:
    """kubectl explain prints descriptions: every enum value and every default is in one."""
    checked = 0
    for kind, crd in all_crds.items():
        for path, node in _walk(root_schema(crd)):
            description = node.get("description", "")
            for value in node.get("enum") or []:
                if value is not None:
                    assert re.search(rf"\b{re.escape(str(value))}\b", description), (kind, path)
                    checked += 1
            if node.get("default") not in (None, [], {}):
                assert "default" in description.lower(), (kind, path, description)
                checked += 1
    assert checked > 100


@pytest.mark.parametrize(
    ("node", "description"),
    [
        ({"description": "Mode.", "enum": ["a", "b", None]}, "Mode. One of: a, b."),
        ({"description": "Mode: a or b.", "enum": ["a", "b"]}, "Mode: a or b."),
        ({"description": "Size.", "default": 2}, "Size. Defaults to 2."),
        ({"description": "On.", "default": False}, "On. Defaults to false."),
        ({"description": "Size, 2 by default.", "default": 2}, "Size, 2 by default."),
        ({"description": "Tags.", "default": []}, "Tags."),
        ({"enum": ["x"], "default": "x"}, "One of: x. Defaults to x."),
    ],
)
def test_enum_and_default_sentences(node: Obj, description: str) -> None:
    from t9kjobs.crds._explain import _note_values

    _note_values(node)
    assert node.get("description") == description


# -- CRD envelope ----------------------------------------------------------------------------


def test_names_subresources_and_columns(manager: PluginManager, all_crds: dict[str, Obj]) -> None:
    for kind, info in manager.kinds.items():
        crd = all_crds[kind]
        assert crd["metadata"]["name"] == f"{info.plural}.batch.tensorstack.dev"
        names = crd["spec"]["names"]
        assert names["kind"] == kind and names["listKind"] == f"{kind}List"
        assert names["plural"] == info.plural and names["singular"] == kind.lower()
        assert names.get("shortNames", []) == list(info.short_names)
        assert "t9k" in names["categories"]
        version = crd["spec"]["versions"][0]
        assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
        assert version["subresources"]["status"] == {}
        columns = {
            c["name"]: (c["jsonPath"], c.get("priority", 0))
            for c in version["additionalPrinterColumns"]
        }
        assert columns == {
            "Phase": (".status.phase", 0),
            "Replicas": (".status.ready", 0),
            "Restarts": (".status.backoffCount", 0),
            "Reason": (".status.reason", 0),
            "Age": (".metadata.creationTimestamp", 0),
            "Mode": (".status.runMode", 1),
            "Queue": (".spec.scheduler.t9kScheduler.queue", 1),
            "Started": (".status.startTime", 1),
            "Finished": (".status.completionTime", 1),
            "Progress": (".status.progress.percent", 1),
            "Infra": (".status.infrastructureRestartCount", 1),
        }
        if info.scale_spec_path:
            assert version["subresources"]["scale"] == {
                "specReplicasPath": ".spec.elastic.expectedReplicas",
                "statusReplicasPath": ".status.aggregate.running",
                "labelSelectorPath": ".status.selector",
            }
        else:
            assert "scale" not in version["subresources"]


def test_elastic_kinds_have_a_scale_subresource(all_crds: dict[str, Obj]) -> None:
    for kind in ("DeepSpeedJob", "PyTorchTrainingJob"):
        assert "scale" in all_crds[kind]["spec"]["versions"][0]["subresources"], kind


# -- kinds of third-party plugins ------------------------------------------------------------


class _Thing(ApiModel):
    """A third party's nested model."""

    size: int = Field(default=2, ge=1, le=8, description="Size.")
    mode: Literal["a", "b"] | None = Field(default=None, description="Mode.")
    procs: int | Literal["gpu"] = Field(default=1, description="A number or gpu.")
    enabled: bool = Field(
        default=False,
        validation_alias=AliasChoices("enabled", "enable", "on"),
        description="On.",
    )


class _ThirdSpec(JobSpec):
    """A third-party kind."""

    thing: _Thing = Field(description="The thing.")
    replica_specs: list[ReplicaSpec] = Field(min_length=1, description="Replicas.")
    elastic_count: int | None = Field(default=None, ge=0, description="Scaled.")


def _manager_with(info: KindInfo) -> PluginManager:
    manager = PluginManager()
    manager.register(types.SimpleNamespace(t9kjobs_kinds=lambda: [info]), "thirdparty")
    return manager


def test_a_third_party_kind_gets_a_crd() -> None:
    info = KindInfo(
        kind="ThirdJob",
        spec_model=_ThirdSpec,
        plural="thirdjobs",
        short_names=("tj",),
        scale_spec_path="elasticCount",
    )
    ((name, text),) = list(crds(_manager_with(info)))
    assert name == "batch.tensorstack.dev_thirdjobs.yaml" == crd_filename(info)
    assert text.startswith("# Generated by `t9kjobs crds`")
    assert "'thirdparty' plugin" in text.splitlines()[0]
    crd = yaml.safe_load(text.split("\n", 1)[1])
    assert structural_problems(root_schema(crd)) == []
    # Without a description of its own, the kind is described by its spec model's docstring;
    # it is in the categories every kind of the operator shares (`kubectl get t9k`).
    assert root_schema(crd)["description"] == "A third-party kind."
    assert crd["spec"]["names"]["categories"] == ["t9k"]
    thing = spec_schema(crd)["properties"]["thing"]
    assert thing["description"] == "The thing."
    props = thing["properties"]
    assert set(props) == {"size", "mode", "procs", "enabled", "enable", "on"}
    assert props["mode"]["enum"] == ["a", "b"]  # optional: a null is pruned, never compared
    assert props["mode"]["description"] == "Mode. One of: a, b."
    assert props["procs"] == {
        "description": "A number or gpu. Defaults to 1.",
        "x-kubernetes-int-or-string": True,
        "pattern": "^(gpu)$",
        "default": 1,
    }
    assert rules(thing) == [
        "!(has(self.enabled) && has(self.enable)) && !(has(self.enabled) && has(self.on))"
        " && !(has(self.enable) && has(self.on))"
    ]
    assert crd["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] == (
        ".spec.elasticCount"
    )


def test_a_model_without_structural_encoding_is_an_error_naming_the_field() -> None:
    class Bad(JobSpec):
        value: str | list[int] = Field(description="Either.")

    with pytest.raises(CrdError, match=r"^value: a union of array and string"):
        openapi_schema(Bad)


def test_a_scale_path_must_be_an_integer_field() -> None:
    info = KindInfo(
        kind="ThirdJob", spec_model=_ThirdSpec, plural="thirdjobs", scale_spec_path="thing"
    )
    with pytest.raises(CrdError, match="not an integer field"):
        crd_for(info)


def test_a_default_the_server_would_refuse_is_dropped() -> None:
    class Spec(JobSpec):
        low: int = Field(default=0, ge=1, description="A default below its minimum.")
        ok: int = Field(default=1, ge=1, description="A valid default.")

    props = openapi_schema(Spec)["properties"]
    assert "default" not in props["low"]
    assert props["ok"]["default"] == 1


# -- crds/ and the command line --------------------------------------------------------------


def _bundled(manager: PluginManager) -> dict[str, str]:
    owners = {p.name for p in manager.plugins() if p.distribution == BUNDLED_DISTRIBUTION}
    wanted = {crd_filename(i) for k, i in manager.kinds.items() if manager.owner_of(k) in owners}
    return {name: text for name, text in crds(manager) if name in wanted}


def test_crds_folder_is_up_to_date(manager: PluginManager) -> None:
    expected = _bundled(manager)
    assert len(expected) >= 4
    present = {p.name: p.read_text() for p in CRDS_DIR.glob("*.yaml")}
    stale = sorted(n for n in expected if present.get(n) != expected[n])
    orphans = sorted(set(present) - set(expected))
    assert not stale and not orphans, (
        f"crds/ is stale (out of date: {stale}, served by no bundled plugin: {orphans}):"
        " run `make crds` to regenerate it from the models"
    )


def test_cli_writes_one_file_per_kind_and_removes_stale_ones(
    tmp_path: Path, manager: PluginManager, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "batch.tensorstack.dev_oldjobs.yaml"
    stale.write_text("old")
    other = tmp_path / "README.md"
    other.write_text("kept")
    assert main(["crds", "--output-dir", str(tmp_path)]) == 0
    written = {p.name for p in tmp_path.glob("batch.tensorstack.dev_*.yaml")}
    assert written == {crd_filename(i) for i in manager.kinds.values()}
    assert other.read_text() == "kept"
    assert "removed" in capsys.readouterr().err
    # A second run changes nothing.
    assert main(["crds", "--output-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""


def test_cli_stdout_is_one_yaml_stream(
    manager: PluginManager, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crds", "--stdout"]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert [d["kind"] for d in docs] == ["CustomResourceDefinition"] * len(manager.kinds)
    assert {d["spec"]["names"]["kind"] for d in docs} == set(manager.kinds)


def test_cli_output_dir_and_stdout_exclude_each_other() -> None:
    with pytest.raises(SystemExit):
        main(["crds", "--stdout", "--output-dir", "x"])


def test_status_model_subclass_is_used() -> None:
    class Status(JobStatus):
        extra_info: str | None = Field(default=None, description="More.")

    info = KindInfo(kind="ThirdJob", spec_model=_ThirdSpec, plural="thirdjobs", status_model=Status)
    status = root_schema(crd_for(info))["properties"]["status"]
    assert "extraInfo" in status["properties"]
