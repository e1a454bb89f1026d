"""What happens to a message as it is put: queue selection, RocketMQ's rewrites, transactional halves,
and ``writer``, the commitlog's single writer's append path (queue offsets, appends, dispatch requests)."""
