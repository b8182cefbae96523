"""Files read as kubectl reads them (t9kjobs.kubeyaml).

The expected values are kubectl v1.36.3's (`kubectl label --local -f FILE x=y -o json`, which
needs no server); tests/fuzz/test_admission.py checks the same table against the kubectl binary
of the local cluster.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from t9kjobs.kubeyaml import MAX_NESTING, Unreadable, YamlProblem, documents

# (plain scalar as written, the value kubectl sends)
SCALARS: list[tuple[str, Any]] = [
    ("yes", True),
    ("on", True),
    ("y", True),
    ("Y", True),
    ("NO", False),
    ("off", False),
    ("n", False),
    ("tRue", "tRue"),
    ("~", None),
    ("null", None),
    ("2020-01-01", "2020-01-01"),
    ("2001-12-14T21:59:43.10-05:00", "2001-12-14T21:59:43.10-05:00"),
    ("0755", 493),
    ("0o755", 493),
    ("0x1F", 31),
    ("0b101", 5),
    ("09", 9),
    ("012345678", 12345678),
    ("1e1", 10),
    ("1.0", 1),
    ("1.5e3", 1500),
    (".5", 0.5),
    ("-.5e-3", -0.0005),
    ("1.", 1),
    ("+12", 12),
    ("-0", 0),
    ("1_000", 1000),
    ("1__0", 10),
    ("1:20", "1:20"),
    ("190:20:30", "190:20:30"),
    ("=", "="),
    ("9223372036854775807", 9223372036854775807),
    ("9223372036854775808", 9.223372036854776e18),  # past int64: a float for the API server
    ("0xFFFFFFFFFFFFFFFF", 1.8446744073709552e19),
    ("100000000000000000000000", 1e23),
    ("1e400", "1e400"),  # out of float64 range: go-yaml keeps the string
    ("!!str 5", "5"),
    ("!!int '12'", 12),
    ("!!float 3", 3),
    ("!!binary aGVsbG8=", "hello"),
    ("!foo bar", "bar"),
    ("'yes'", "yes"),
    ('"0755"', "0755"),
]


def _value(scalar: str) -> Any:
    (doc,) = documents(f"kind: X\nv: {scalar}\n".encode())
    return doc.value["v"]


@pytest.mark.parametrize(("scalar", "expected"), SCALARS, ids=[s for s, _ in SCALARS])
def test_scalars_resolve_as_kubectl_sends_them(scalar: str, expected: Any) -> None:
    got = _value(scalar)
    assert (type(got), got) == (type(expected), expected)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: .nan\n", "JSON has no NaN"),
        ("a: .inf\n", "JSON has no NaN"),
        ("a: !!int x\n", "cannot decode !!str `x` as a !!int"),
        ("a: &a [*a]\n", "anchor 'a' value contains itself"),
        ("a: *nope\n", "unknown anchor 'nope'"),
        ("~: 1\n", "unsupported map key"),
        ("? [a]\n: 1\n", "invalid map key"),
        ("a: 1\n\tb: 2\n", "tab character"),
        ("a: b\x00c\n", "control character U+0000"),
        ("--- x\na: 1\n", "invalid document separator"),
        ("a: !!binary '%%%'\n", "invalid base64"),
    ],
)
def test_what_kubectl_refuses_is_a_located_problem(text: str, message: str) -> None:
    with pytest.raises(YamlProblem) as err:
        documents(text.encode())
    assert message in err.value.message and err.value.line >= 1


def test_keys_become_strings_later_duplicates_and_merges_win() -> None:
    text = "base: &b {x: 1, k: 2}\nm:\n  <<: *b\n  k: 3\n  k: 4\n  1.5: a\n  2.0: b\n  y: c\n"
    (doc,) = documents(text.encode())
    assert doc.value["m"] == {"x": 1, "k": 4, "1.5": "a", "2": "b", "true": "c"}


def test_an_alias_bomb_is_refused_and_an_honest_alias_is_not() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]" for i in range(8)
    ]
    with pytest.raises(YamlProblem, match="excessive aliasing"):
        documents("\n".join(lines).encode())
    (doc,) = documents(b"a: &a {x: 1}\nb: *a\nc: *a\n")
    assert doc.value == {"a": {"x": 1}, "b": {"x": 1}, "c": {"x": 1}}


def test_documents_split_at_separator_lines_nulls_skipped() -> None:
    text = "---\nkind: A\n--- # comment\n~\n---\n\n---\nkind: B\n...\n"
    assert [d.value for d in documents(text.encode())] == [{"kind": "A"}, {"kind": "B"}]
    assert [d.line for d in documents(text.encode())] == [2, 8]


def test_deep_nesting_is_a_problem_not_a_recursion_error() -> None:
    deep = "a: " + "[" * (MAX_NESTING + 5) + "]" * (MAX_NESTING + 5) + "\n"
    with pytest.raises(YamlProblem, match="nested deeper than"):
        documents(deep.encode())
    block = "a:\n" + "".join("  " * i + "-\n" for i in range(MAX_NESTING + 5))
    with pytest.raises(YamlProblem, match="nested deeper than"):
        documents(block.encode())


def test_encodings_utf16_with_a_mark_and_utf8_only() -> None:
    assert documents("kind: é\n".encode("utf-16"))[0].value == {"kind": "é"}
    assert documents(b"\xef\xbb\xbfkind: A\n")[0].value == {"kind": "A"}
    with pytest.raises(Unreadable, match="byte 0xe9 at line 2, column 10"):
        documents("kind: A\nname: caf\xe9\n".encode("latin-1"))


def test_json_files_are_read_as_json_with_the_same_numbers() -> None:
    (doc,) = documents(b' {"a": 2.0, "b": 1e1, "c": 9223372036854775808, "d": [0.5]}')
    assert doc.value == {"a": 2, "b": 10, "c": 9.223372036854776e18, "d": [0.5]}
    assert isinstance(doc.value["a"], int)
    with pytest.raises(YamlProblem, match="malformed JSON"):
        documents(b'{"a": NaN}')
    assert not math.isnan(doc.value["d"][0])
