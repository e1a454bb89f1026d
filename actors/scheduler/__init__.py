"""The scheduler actor: delivers delay-level messages from ``SCHEDULE_TOPIC_XXXX`` to their real topics.

- ``schedule``: reads each level's schedule queue and the records its entries point at, read-only,
  in order, and says which entries are due (``ScheduleQueues``); builds the re-put of one
  (``reput_wire``);
- ``progress``: how far each level is delivered, ``config/delayOffset.json`` and the re-put floor,
  and what a restart learns from the commitlog about re-puts made after the last save;
- ``actor``: the loop: wake on the earliest due time or an ``arrived`` notice for the schedule
  topic, send the due messages to the writer's ingress in one batch, advance on PUT_OK.
"""
