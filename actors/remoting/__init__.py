"""The RocketMQ remoting front: one actor process (``remoting``) that lets stock RocketMQ clients
produce, consume and query over RocketMQ's TCP remoting protocol, in these rooms:

    listener.py   the process: an asyncio TCP listener that reads frames, serves each request in
                  its own task and writes the replies back (``RemotingActor``)
    front.py      the broker front: what each request is answered with, by way of the same ZeroMQ
                  requests an ipc client sends to the writer and the readers (``BrokerFront``)
    clients.py    the client table: consumer groups from heartbeats, orderly consumers' queue locks
    namesrv.py    the NameServer: brokers' registrations and the routes (``NameServer``), over
                  brokers.py's table (RocketMQ's RouteInfoManager)
    registrar.py  this broker's registration with the NameServers of ``[remoting] namesrv``
    roles.py      what a slave refuses, and where each pull's answer says to pull next

The wire codec is ``mqstore.ipc.remoting.codec``; nothing here writes the store's files (a slave's
registration reads its topics file, and pull advice the commitlog's file names).
"""
