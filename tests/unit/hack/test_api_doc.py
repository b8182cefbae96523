"""docs/api.md: its tables of names, subresources and columns are the CRDs' own.

hack/gen_api_doc.py renders them from crds/ (kept equal to the models by test_crds); this fails
as soon as the page and the CRDs disagree, as they once did about the scale subresource's
`labelSelectorPath`.
"""

from __future__ import annotations

import copy

from tests.unit.hack.hack_scripts import load_script

gen = load_script("gen_api_doc")


def test_the_page_is_up_to_date() -> None:
    text = gen.DOC.read_text()
    assert gen.update(text) == text, (
        "docs/api.md is stale: run `make crds` (or python hack/gen_api_doc.py) and review the diff"
    )


def test_every_kind_of_crds_is_described() -> None:
    text = gen.DOC.read_text()
    crds = gen.load_crds()
    assert len(crds) == 4
    for crd in crds:
        names = crd["spec"]["names"]
        assert f"| `{names['kind']}` | `{names['plural']}` |" in text


def test_the_scale_paths_come_from_the_crd() -> None:
    crds = gen.load_crds()
    text = gen.DOC.read_text()
    row = "| `DeepSpeedJob` | yes | `.spec.elastic.expectedReplicas`, `.status.aggregate.running`, `.status.selector` |"
    assert row in text
    changed = copy.deepcopy(crds)
    deepspeed = next(c for c in changed if c["spec"]["names"]["kind"] == "DeepSpeedJob")
    del deepspeed["spec"]["versions"][0]["subresources"]["scale"]["labelSelectorPath"]
    stale = gen.update(text, changed)
    assert stale != text
    assert (
        "| `DeepSpeedJob` | yes | `.spec.elastic.expectedReplicas`, `.status.aggregate.running`,"
        " no `labelSelectorPath` |"
    ) in stale


def test_an_edit_inside_a_generated_section_is_undone() -> None:
    text = gen.DOC.read_text()
    edited = text.replace("`.status.selector` |", "none |", 1)
    assert edited != text
    assert gen.update(edited) == text
