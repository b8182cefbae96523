"""CEL rule cost: `maxItems` for the lists a rule iterates or compares.

The API server estimates each `x-kubernetes-validations` rule's cost from the bounds of the
lists it touches and refuses a CRD over budget; an unbounded list gets `RULE_LIST_MAX_ITEMS`.
"""

from __future__ import annotations

import re

from t9kjobs.crds._keywords import _ordered
from t9kjobs.vocabulary import Obj

# maxItems given to a list that a CEL rule iterates or compares when its model sets none; the
# same bound GenericJob puts on replicaSpecs.
RULE_LIST_MAX_ITEMS = 32

_RULE_FIELD = re.compile(r"\b(?:self|oldSelf)\.([A-Za-z_][A-Za-z0-9_]*)(\s*[.\[]\s*(\w+)?)?")
# `has(self.x)` tests presence only: it costs nothing per list item.
_HAS = re.compile(r"\bhas\(\s*(?:self|oldSelf)(?:\.\w+)+\s*\)")


def _bound_rule_lists(node: Obj) -> None:
    """Give `maxItems` to the lists this node's CEL rules iterate or compare."""
    rules = node.get("x-kubernetes-validations") or []
    if not rules:
        return
    if node.get("type") == "array":
        node.setdefault("maxItems", RULE_LIST_MAX_ITEMS)
        return
    props = node.get("properties") or {}
    for rule in rules:
        for match in _RULE_FIELD.finditer(_HAS.sub("", str(rule.get("rule", "")))):
            prop = props.get(match.group(1))
            if not prop or prop.get("type") != "array" or "maxItems" in prop:
                continue
            # Indexing and size() cost the same whatever the length; iterating or `==` do not.
            after = (match.group(2) or "").strip()
            if after.startswith("[") or match.group(3) == "size":
                continue
            prop["maxItems"] = RULE_LIST_MAX_ITEMS
            props[match.group(1)] = _ordered(prop)
