"""What happens to a message as it is put: queue selection, RocketMQ's rewrites, transactional halves."""
