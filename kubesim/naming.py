"""Names the apiserver makes up: `generateName` suffixes."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from kubesim.model import StoreError

if TYPE_CHECKING:
    from collections.abc import Callable

# The apiserver's alphabet for generated suffixes (no vowels, no confusable characters).
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_rng = random.Random()


def generate_name(prefix: str, taken: Callable[[str], bool]) -> str:
    """`prefix` (cut to 58 characters) + 5 random characters, avoiding names already `taken`."""
    for _ in range(32):
        name = prefix[:58] + "".join(_rng.choice(ALPHABET) for _ in range(5))
        if not taken(name):
            return name
    raise StoreError(409, "AlreadyExists", f"could not generate a unique name from {prefix!r}")
