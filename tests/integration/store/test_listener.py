"""The process's one LISTEN connection: every component's channels on one backend, each
notification to its channel's listeners only, and after a lost connection every listener told
(lost, then connected again once every channel is LISTENed on anew)."""

from __future__ import annotations

import asyncpg

from app.store.listener import Listener
from tests.support.listening import listening
from tests.support.pg_fixtures import connected
from tests.support.waiting import wait_until


class Heard:
    """What one listener was told: payloads, connects and losses."""

    def __init__(self) -> None:
        self.payloads: list[str] = []
        self.connected = 0
        self.lost = 0

    def payload(self, payload: str) -> None:
        self.payloads.append(payload)

    def up(self) -> None:
        self.connected += 1

    def down(self) -> None:
        self.lost += 1


async def _listen(listener: Listener, channel: str) -> Heard:
    heard = Heard()
    await listener.listen(channel, heard.payload, on_connected=heard.up, on_lost=heard.down)
    return heard


async def _backends(conn: asyncpg.Connection, name: str) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", name
        )
    )


async def test_every_channel_is_heard_on_one_connection_by_its_own_listeners(
    database_url: str,
) -> None:
    async with listening(database_url, probe_interval=0.2) as listener:
        work, tokens_a = (
            await _listen(listener, "aicp_work"),
            await _listen(listener, "aicp_tokens"),
        )
        await wait_until(lambda: work.connected == 1 and tokens_a.connected == 1, timeout=5)
        late = await _listen(listener, "aicp_tokens")  # while up: heard at once
        watch = await _listen(listener, "aicp_watch")
        assert late.connected == 1 and watch.connected == 1
        async with connected(database_url) as conn:
            assert await _backends(conn, listener.application_name) == 1
            await conn.execute("SELECT pg_notify('aicp_work', 'workload:1')")
            await conn.execute("SELECT pg_notify('aicp_tokens', 'token-1')")
            await conn.execute("SELECT pg_notify('aicp_watch', '')")
            await wait_until(lambda: watch.payloads == [""], timeout=5)
        assert work.payloads == ["workload:1"]
        assert tokens_a.payloads == late.payloads == ["token-1"]


async def test_a_lost_connection_tells_every_listener_and_listens_again_on_every_channel(
    database_url: str,
) -> None:
    async with listening(database_url, probe_interval=0.2) as listener:
        work, watch = await _listen(listener, "aicp_work"), await _listen(listener, "aicp_watch")
        gone = await listener.listen("aicp_tokens", lambda _payload: None)
        await wait_until(lambda: work.connected == 1 and watch.connected == 1, timeout=5)
        first_pid = listener.backend_pid
        async with connected(database_url) as conn:
            await conn.execute("SELECT pg_terminate_backend($1)", first_pid)
            await wait_until(lambda: work.connected == 2 and watch.connected == 2, timeout=10)
            assert work.lost == watch.lost == 1
            assert listener.backend_pid not in (None, first_pid)
            gone.close()
            await conn.execute("SELECT pg_notify('aicp_work', 'after')")
            await conn.execute("SELECT pg_notify('aicp_watch', 'after')")
            await wait_until(lambda: work.payloads == ["after"] == watch.payloads, timeout=5)


async def test_a_listener_that_cannot_connect_keeps_trying_and_tells_nobody_it_is_up(
    database_url: str,
) -> None:
    async with listening("postgresql://postgres@127.0.0.1:9/none") as listener:
        heard = await _listen(listener, "aicp_work")
        await wait_until(lambda: listener.failures >= 2, timeout=10)
        assert not listener.listening.is_set()
        assert heard.connected == 0 and heard.lost == 0
