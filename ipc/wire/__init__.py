"""The wire contract: what a frame between a client and an actor, or between two actors, means."""
