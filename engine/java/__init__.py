"""Java's semantics RocketMQ's files depend on: String.hashCode and Long.parseLong."""
