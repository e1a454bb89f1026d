"""The metrics process (``metrics``): Prometheus metrics and a read-only dashboard on one HTTP listener.

    actor.py         the loop: collect, render, hand to the listener (``MetricsActor``)
    collect.py       one collection, over the ops the supervisor and the other actors already serve
    exposition.py    a collection as Prometheus text (``prometheus_client``)
    listener.py      the HTTP listener: /metrics, /api/status, / and the dashboard's files
    static/          the dashboard: plain HTML, one script, one stylesheet; no build step

What the other actors count for it is ``mqstore.actors.meters``.
"""
