"""Image references are checked as registries and container runtimes parse them (generated)."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.validation import check_image

component = st.from_regex(r"[a-z0-9]+(?:[._-][a-z0-9]+){0,2}", fullmatch=True).filter(
    lambda c: len(c) <= 30
)
domains = st.none() | st.from_regex(
    r"[a-z0-9]{1,10}(\.[a-z]{2,5}){1,2}(:[0-9]{2,5})?", fullmatch=True
)
tags = st.none() | st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
digests = st.none() | st.text("0123456789abcdef", min_size=64, max_size=64).map(
    lambda h: f"sha256:{h}"
)


@settings(max_examples=300)
@given(domains, st.lists(component, min_size=1, max_size=3), tags, digests)
def test_references_built_from_the_grammar_are_accepted(
    domain: str | None, path: list[str], tag: str | None, digest: str | None
) -> None:
    image = "/".join([*([domain] if domain else []), *path])
    image += f":{tag}" if tag else ""
    image += f"@{digest}" if digest else ""
    if len(image) <= 255:
        assert check_image("image", image) == [], image


@settings(max_examples=500)
@given(st.text(max_size=120))
def test_any_text_is_answered_quickly_and_what_passes_has_reference_shape(text: str) -> None:
    started = time.perf_counter()
    violations = check_image("image", text)
    assert time.perf_counter() - started < 0.05
    if not violations:
        assert text and not re.search(r"\s", text) and len(text) <= 512
        name = text.split("@", 1)[0]
        repository = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
        assert repository.split("/", 1)[-1] == repository.split("/", 1)[-1].lower()


@pytest.mark.parametrize(
    "image",
    ["Nginx", "acme/Train:1", "nginx:", "nginx:-x", "ghcr.io//x", "x@sha256:short", "x@md5",
     "a" * 256, ":latest", "nginx:" + "t" * 129, "ghcr.io/acme/train:1.4 ", "x y"],
)  # fmt: skip
def test_references_no_registry_accepts_are_refused(image: str) -> None:
    assert [field for field, _ in check_image("image", image)] == ["image"]
