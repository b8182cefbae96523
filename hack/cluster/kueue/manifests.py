"""Kueue's manifests as the local cluster installs them (hack/cluster/kueue/start.sh).

    manifests.py crds CRD_DIR                  -> the CRDs, each with its storage version only
    manifests.py webhooks WEBHOOK_YAML URL CA  -> the webhooks on Kueue's own API, at URL

Kueue runs as a host process here, not behind a Service: the API server calls its webhooks
at a URL (127.0.0.1) with a CA we made. Its CRDs are served at their storage version
(v1beta2) alone, so no conversion webhook is needed, and only the webhooks on
`kueue.x-k8s.io` objects are installed: Kueue manages no pods, Jobs, Deployments or
StatefulSets here (our kinds are external frameworks, whose controller is the operator), so
its webhooks on those would only make their creation fail while Kueue is down. Reads YAML,
writes JSON (which kubectl reads as well) on stdout.
"""

from __future__ import annotations

import base64
import json
import pathlib
import sys

import yaml

KUEUE_GROUP = "kueue.x-k8s.io"
CONFIG_NAMES = {
    "MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration",
}


def crds(directory: str) -> dict[str, object]:
    items = []
    for path in sorted(pathlib.Path(directory).glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        spec["versions"] = [v for v in spec["versions"] if v.get("storage")]
        spec.pop("conversion", None)
        items.append(crd)
    return {"apiVersion": "v1", "kind": "List", "items": items}


def webhooks(manifest: str, url: str, ca_file: str) -> dict[str, object]:
    ca = base64.b64encode(pathlib.Path(ca_file).read_bytes()).decode()
    items = []
    for doc in yaml.safe_load_all(pathlib.Path(manifest).read_text()):
        if not doc or doc.get("kind") not in CONFIG_NAMES:
            continue
        kept = []
        for hook in doc.get("webhooks") or []:
            groups = {g for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []}
            if groups != {KUEUE_GROUP}:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": url.rstrip("/") + path, "caBundle": ca}
            kept.append(hook)
        doc["metadata"] = {"name": CONFIG_NAMES[doc["kind"]]}
        doc["webhooks"] = kept
        items.append(doc)
    return {"apiVersion": "v1", "kind": "List", "items": items}


def main(argv: list[str]) -> None:
    if argv[:1] == ["crds"] and len(argv) == 2:
        out = crds(argv[1])
    elif argv[:1] == ["webhooks"] and len(argv) == 4:
        out = webhooks(argv[1], argv[2], argv[3])
    else:
        sys.exit(__doc__)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
