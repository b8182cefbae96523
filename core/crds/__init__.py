"""CustomResourceDefinitions generated from the kinds' pydantic models (`t9kjobs crds`).

One CRD (apiextensions.k8s.io/v1) per kind the loaded plugins serve, bundled or third-party. The
schema is the spec and status models' JSON schema made *structural*, as the API server demands:

* every `$ref` inlined, `title` dropped, `anyOf [X, null]` written as X: an optional field is
  not `nullable`, so that the API server prunes an explicit null (null means absent);
* `int | str` as `x-kubernetes-int-or-string` (the string part's enum becomes a `pattern`, which
  only applies to strings, the integer part keeps its bounds);
* a string-or-object union (the restart policy: `OnFailure` or `{policy, limit}`) as a typeless
  node with `x-kubernetes-preserve-unknown-fields`, a `pattern` for the string form and the
  object form's `properties` and `maxProperties` (each applies to its own form only). CEL cannot
  check it: the API server hides typeless nodes from CEL;
* `dict[str, Any]` (pod templates) as `type: object` with `x-kubernetes-preserve-unknown-fields`,
  other dicts as `additionalProperties`, `extra="forbid"` as nothing: the server refuses unknown
  fields under kubectl's strict field validation, and prunes them for other clients;
* every spelling of a field declared with `validation_alias=AliasChoices(...)` as a property of
  its own, so that pruning never drops the spelling a user took from the other reference. Such
  fields lose their `default` (a defaulted canonical spelling would override the alias the user
  wrote) and their `required` (replaced by a CEL rule accepting either spelling); a CEL rule
  refuses both spellings at once, as pydantic does;
* `x-kubernetes-*` keys from the models' `json_schema_extra` (CEL `x-kubernetes-validations`)
  copied as they are; a list a rule iterates or compares gets `maxItems` (`RULE_LIST_MAX_ITEMS`)
  when its model sets none, so that the rule's estimated cost stays within the server's budget;
* a `default` kept only when it validates against its own node (the server refuses the CRD
  otherwise);
* every enum's values and every default said in the field's description, where it does not
  already say them, for `kubectl explain`.

No I/O here: the command line writes the files.

The parts: `_aliases` (pydantic's JSON schema with every alias spelling), `_convert` (JSON schema
to structural OpenAPI), `_keywords` (keyword tables, key order), `_rules` (CEL list bounds),
`_defaults` (default vetting), `_explain` (enum and default sentences), `_assemble` (the CRD,
its printer columns and subresources, and its file), `_common` (shared names).
"""

from t9kjobs.crds._assemble import crd_filename, crd_for, crd_yaml, crds
from t9kjobs.crds._common import CrdError, json_type
from t9kjobs.crds._convert import openapi_schema
from t9kjobs.crds._rules import RULE_LIST_MAX_ITEMS

__all__ = [
    "RULE_LIST_MAX_ITEMS",
    "CrdError",
    "crd_filename",
    "crd_for",
    "crd_yaml",
    "crds",
    "json_type",
    "openapi_schema",
]
