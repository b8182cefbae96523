"""Manifest files read the way `kubectl` reads them, so that what `t9kjobs validate` accepts is
what the API server receives.

kubectl splits a file at `---` lines, reads each part with go-yaml v2 (YAML 1.1 scalars: `yes`,
`on` and `y` are true, `0755` is octal, `1_000` is 1000, `1e1` is a number, a date stays a
string), turns it into JSON (keys become strings, NaN and infinities are errors) and sends that
JSON; a file starting with `{` is read as JSON instead. Reading with PyYAML's defaults differs on
all of these (`1e1` is a string there, `2024-01-31` a date, `y` a string, duplicate keys and
alias bombs unchecked), so this module resolves scalars itself, from PyYAML's events, with
go-yaml's rules:

* plain scalars resolve as go-yaml's `resolve()` does; quoted ones are strings; `!!int`,
  `!!float`, `!!bool`, `!!null`, `!!str`, `!!binary` and `!!timestamp` tags are honoured and
  other tags ignored;
* a later duplicate key wins, `<<` merges (later keys win over merged ones), keys become strings
  as sigs.k8s.io/yaml makes them (a null or list key is an error);
* aliases expand within go-yaml's budget (an alias bomb is "excessive aliasing"), an anchor
  that contains itself is an error;
* numbers come out as the API server decodes kubectl's JSON: integral values up to 2^63-1 are
  ints, larger or fractional ones floats;
* nesting deeper than `MAX_NESTING` is an error (go-yaml allows 10,000, libyaml 1,000; a job may
  nest far less, see `t9kjobs.loading`), and no part of the reading recurses.

Bytes are decoded as UTF-8, or UTF-16 with a byte-order mark; anything else is `Unreadable`
(kubectl would pass invalid UTF-8 on as U+FFFD, changing the text silently).

The reading is in steps, a module each: `reading` (encodings, the `---` split, JSON files),
`composing` (events into nodes), `scalars` (go-yaml's resolution), `decoding` (keys, merges,
aliases, JSON numbers); `document` holds what they give and raise.
"""

from t9kjobs.kubeyaml.document import MAX_NESTING, Document, Unreadable, YamlProblem
from t9kjobs.kubeyaml.reading import decode, documents

__all__ = ["MAX_NESTING", "Document", "Unreadable", "YamlProblem", "decode", "documents"]
