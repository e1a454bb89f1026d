"""mqstore's clients for asyncio: ``Producer``, ``Consumer``, ``AckConsumer`` and ``Admin``, taking the
same arguments as the blocking ones in ``mqstore``, every call awaitable.

    import asyncio
    from mqstore.aio import Consumer, Producer

    async def main() -> None:
        async with Producer("mqstore-data") as producer:
            results = await asyncio.gather(*(producer.send("Orders", b"%d" % i) for i in range(100)))
        async with Consumer("mqstore-data", group="billing", topic="Orders") as consumer:
            async for message in consumer:      # ends when the consumer is closed
                ...

    asyncio.run(main())

Each awaits the blocking client's own futures, completed on that client's I/O thread: no executor
thread, no thread per call. Their names are frozen like ``mqstore``'s (``tests/test_public_api.py``).
"""

from mqstore.ipc.client.aio import AckConsumer, Admin, Consumer, Producer

__all__ = ["AckConsumer", "Admin", "Consumer", "Producer"]
