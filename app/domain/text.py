"""Whole-string patterns and the characters no name, key or label may carry.

Python's `$` also matches before a final newline, and msgspec checks `Meta(pattern=...)`
with `re.search`, so `^[a-z]+$` accepts ``"abc\\n"``. `whole` writes a pattern so that it
matches only the whole string both in Python and in ECMA-262 (the dialect of the OpenAPI
`pattern` that generators and clients read): `(?![\\s\\S])` — "no character follows" — is
the end of the string in both, where `\\Z` is Python only. Code that matches in Python calls
`fullmatch`; every pattern declared on a struct goes through `whole`.

Text that is not free-form (names, keys, label keys and values, image references, display
names, header values) must not carry control characters: `control_problem` names the first
one. Free-form text (descriptions, command arguments, env values) is stored as given.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final


def whole(body: str) -> str:
    """`body` anchored at both ends, correct under `re.search` and in ECMA-262."""
    return f"^(?:{body})$(?![\\s\\S])"


#: C0, DEL, C1, the Unicode line and paragraph separators, and the bidirectional controls
#: (marks, embeddings, overrides, isolates) that make text display other than it reads.
CONTROL_CHARACTERS: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]"
)


def control_problem(text: str) -> str | None:
    """None when `text` holds no control character, else a sentence naming the first one."""
    found = CONTROL_CHARACTERS.search(text)
    if found is None:
        return None
    char = found.group()
    name = unicodedata.name(char, "control character")
    return f"must not contain control characters (found U+{ord(char):04X} {name})"
