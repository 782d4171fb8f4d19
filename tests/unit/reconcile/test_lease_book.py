"""The lease book's per-kind counts (the `aicp_leases_held` gauge, set on every change) stay
equal to what it holds, on generated sequences of grants, renewals and drops."""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.kinds import KINDS
from app.reconcile.leasing import LeaseBook
from app.store.leases import Grant, ResourceKey

KEYS = [ResourceKey(kind, uuid.UUID(int=n)) for kind in KINDS for n in range(4)]
operations = st.lists(
    st.tuples(
        st.sampled_from(["grant", "drop", "renew", "expire"]),
        st.lists(st.sampled_from(KEYS), max_size=4),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_counts_follow_every_grant_renewal_and_drop(
    ops: list[tuple[str, list[ResourceKey]]],
) -> None:
    async def replay() -> None:
        dropped: list[ResourceKey] = []
        book = LeaseBook("a", 15.0, dropped.append)
        for op, keys in ops:
            grants = [Grant(key, 1) for key in keys]
            if op == "grant":
                book.granted(grants, book.now())
            elif op == "drop":
                for key in keys:
                    book.drop(key)
            elif op == "renew":  # what the renewal returned; the rest is dropped
                book.renewed(grants, book.now(), book.next_seq())
            else:  # every hold's local deadline passes
                book.granted(grants, book.now() - 60.0)
                book.expire_stale()
            expected = dict.fromkeys(KINDS, 0)
            for key in book.held_keys():
                expected[key.kind] += 1
            assert book.counts() == expected
            assert sum(expected.values()) == len(book)

    asyncio.run(replay())
