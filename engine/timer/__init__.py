"""RocketMQ 5's timer store, the passive part: the put rule that parks a timer message on
``rmq_sys_wheel_timer`` (``put_rule``), the ``timerwheel`` file (``wheel``), the ``timerlog`` files
(``log``), the ``config/timercheck`` checkpoint (``checkpoint``) and the store that joins them and
recovers them (``store``). No sockets, threads or clocks: the ``timer`` actor (``mqstore.actors.timer``)
walks the timer topic's consume queue into them and puts due messages back through the writer.
"""
