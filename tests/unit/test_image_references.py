"""Image references are checked as registries and container runtimes parse them (generated)."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.domain.validation import check_image

LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
alnum = st.text(LOWER, min_size=1, max_size=8)
# repository components: alphanumerics joined by one separator (".", "_", "__", "-")
component = st.lists(alnum, min_size=1, max_size=3).flatmap(
    lambda parts: st.lists(
        st.sampled_from([".", "_", "__", "-"]), min_size=len(parts) - 1, max_size=len(parts) - 1
    ).map(lambda seps: parts[0] + "".join(s + p for s, p in zip(seps, parts[1:], strict=True)))
)
domains = st.none() | st.builds(
    lambda host, tld, port: f"{host}.{tld}" + (f":{port}" if port else ""),
    alnum, st.text("abcdefghij", min_size=2, max_size=4), st.none() | st.integers(1, 65535),
)  # fmt: skip
tags = st.none() | st.builds(
    lambda first, rest: first + rest,
    st.sampled_from("Aa0_"), st.text(LOWER + "ABC_.-", max_size=20),
)  # fmt: skip
digests = st.none() | st.text("0123456789abcdef", min_size=64, max_size=64).map(
    lambda h: f"sha256:{h}"
)


@settings(max_examples=200, deadline=None)
@given(domains, st.lists(component, min_size=1, max_size=3), tags, digests)
def test_references_built_from_the_grammar_are_accepted(
    domain: str | None, path: list[str], tag: str | None, digest: str | None
) -> None:
    # Without a registry, a first component with "." or ":" would be read as one (the
    # grammar's domain rule), and "_" is not allowed in a host name.
    assume(domain is not None or "." not in path[0])
    image = "/".join([*([domain] if domain else []), *path])
    image += f":{tag}" if tag else ""
    image += f"@{digest}" if digest else ""
    if len(image) <= 255:
        assert check_image("image", image) == [], image


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_any_text_is_answered_quickly_and_what_passes_has_reference_shape(text: str) -> None:
    started = time.perf_counter()
    violations = check_image("image", text)
    assert time.perf_counter() - started < 1.0  # a backtracking regex would take far longer
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
