"""The example jobs a plugin author gives the conformance kit: valid ones, and invalid ones.

Every `*.yaml` / `*.yml` file under an examples folder, searched recursively, may hold job
manifests (several documents allowed); a document is an example of the kinds it names. A file
under a folder called `invalid` holds invalid examples: each must name, in the annotation
`conformance.t9kjobs.dev/rejected-at`, the field path(s) its rejection must report
(comma-separated, e.g. `spec.worker.replicas`), so that an example rejected for another reason
than the one it was written for does not pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t9kjobs.kubeyaml import Unreadable, YamlProblem, documents

__all__ = ["REJECTED_AT", "Example", "find_examples"]

REJECTED_AT = "conformance.t9kjobs.dev/rejected-at"
_INVALID_FOLDER = "invalid"


@dataclass(frozen=True)
class Example:
    """One manifest of an examples file (or the file itself, when it is not readable YAML)."""

    id: str  # the file relative to its examples folder, `#<n>` for the n-th document
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    invalid: bool = False
    error: str | None = None  # why the file could not be read as manifests

    @property
    def kind(self) -> str | None:
        kind = self.manifest.get("kind")
        return kind if isinstance(kind, str) else None

    @property
    def expected_paths(self) -> tuple[str, ...]:
        """The field paths an invalid example must be rejected at (its annotation)."""
        annotations = (self.manifest.get("metadata") or {}).get("annotations") or {}
        value = annotations.get(REJECTED_AT) if isinstance(annotations, dict) else None
        if not isinstance(value, str):
            return ()
        return tuple(p.strip() for p in value.split(",") if p.strip())


def _files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        if path.suffix in (".yaml", ".yml") and path.is_file():
            yield path


def _read(folder: Path, path: Path, key: str) -> Iterator[Example]:
    invalid = _INVALID_FOLDER in path.relative_to(folder).parts[:-1]
    try:  # read as kubectl reads it, as a user submits it
        docs = [d.value for d in documents(path.read_bytes())]
    except (OSError, Unreadable, YamlProblem) as exc:
        yield Example(key, path, invalid=invalid, error=f"{path}: {exc}")
        return
    for i, doc in enumerate(docs):
        if isinstance(doc, dict):
            yield Example(f"{key}#{i}" if len(docs) > 1 else key, path, doc, invalid)


def find_examples(folders: Iterable[Path]) -> list[Example]:
    """Every example under `folders`, in a stable order; ids unique across the folders."""
    found: list[Example] = []
    seen: set[str] = set()
    for folder in folders:
        for path in _files(folder):
            key = path.relative_to(folder).as_posix()
            if key in seen:
                key = f"{folder.name}/{key}"
            seen.add(key)
            found.extend(_read(folder, path, key))
    return found
