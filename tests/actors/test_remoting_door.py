"""The remoting front's door on its own: who gets in when the table is full, and the lock table's bounds."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

from mqstore.actors.remoting.clients import QueueLocks
from mqstore.actors.remoting.door import Connection, Door, usable_connections
from mqstore.actors.remoting.headers import Peer


def _fill(door: Door, ips: list[str], busy: bool = False) -> list[Connection]:
    out = []
    for i, ip in enumerate(ips):
        conn = Connection(Peer(i + 1, ip, 1000 + i), cast(Any, None), active_ms=i)
        if busy:
            conn.tasks.add(cast(Any, object()))
        door.enter(conn)
        out.append(conn)
    return out


def test_a_full_table_of_idle_sockets_reset_a_new_client() -> None:
    door = Door(4, 3, 1 << 20, 1 << 20)
    conns = _fill(door, ["127.0.1.1", "127.0.1.1", "127.0.1.1", "127.0.1.2"])
    assert door.admit("127.0.1.1", 5_000) == (False, None)  # its own cap
    admitted, victim = door.admit("127.0.0.1", 5_000)
    assert admitted and victim is conns[0]  # the largest holder's longest idle gives way


def test_equal_holders_make_room_from_the_longest_idle_and_refuse_only_when_all_are_busy() -> None:
    door = Door(2, 4, 1 << 20, 1 << 20)
    conns = _fill(door, ["127.0.1.1", "127.0.1.2"])
    assert door.admit("127.0.0.1", 500) == (False, None)  # both just spoke: neither is settled idle
    assert door.admit("127.0.0.1", 5_000) == (True, conns[0])
    busy = Door(2, 4, 1 << 20, 1 << 20)
    _fill(busy, ["127.0.1.1", "127.0.1.2"], busy=True)
    assert busy.admit("127.0.0.1", 5_000) == (False, None) and busy.refused == 1


def test_large_frames_wait_for_the_read_budget_and_small_ones_never_do() -> None:
    async def scenario() -> None:
        door = Door(4, 4, 3 << 20, 2 << 20)
        first = await door.reserve("a", 2 << 20)
        assert await door.reserve("a", 100) == 0
        waiting = asyncio.create_task(door.reserve("a", 1 << 20))  # past the address's share
        other = await door.reserve("b", 1 << 20)
        await asyncio.sleep(0)
        assert not waiting.done()
        door.release("a", first)
        assert await asyncio.wait_for(waiting, 5) == 1 << 20
        assert door.reading_bytes == 2 << 20 and other
    asyncio.run(scenario())


def test_usable_connections_leave_descriptors_for_the_front_itself() -> None:
    assert usable_connections(1024, 1024) == 1024 - 128
    assert usable_connections(100, 20000) == 100


def _lock_body(client: str, queues: range) -> bytes:
    return json.dumps({"consumerGroup": "g", "clientId": client,
                       "mqSet": [{"topic": "T", "brokerName": "b", "queueId": q} for q in queues]}).encode()


def test_queue_locks_were_never_pruned() -> None:
    locks = QueueLocks(max_locks=10)
    assert len(json.loads(locks.lock(_lock_body("c1", range(8)), 0, connection=1))["lockOKMQSet"]) == 8
    assert len(json.loads(locks.lock(_lock_body("c2", range(8, 20)), 0, connection=2))["lockOKMQSet"]) == 2
    locks.drop_connection(1)
    assert len(locks.held) == 2
    later = 61_000  # past the lock's life: lapsed ones are swept for room
    assert len(json.loads(locks.lock(_lock_body("c3", range(20, 40)), later, connection=3))["lockOKMQSet"]) == 10
