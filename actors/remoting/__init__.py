"""The RocketMQ remoting front: one actor process (``remoting``) that lets stock RocketMQ clients
produce, consume and query over RocketMQ's TCP remoting protocol, in three rooms:

    listener.py   the process: an asyncio TCP listener that reads frames, serves each request in
                  its own task and writes the replies back (``RemotingActor``)
    front.py      the broker front: what each request is answered with, by way of the same ZeroMQ
                  requests an ipc client sends to the writer and the readers (``BrokerFront``)
    clients.py    the client table: consumer groups from heartbeats, orderly consumers' queue locks

The wire codec is ``mqstore.ipc.remoting.codec``; nothing here touches the store's files.
"""
