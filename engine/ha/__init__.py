"""Replication's engine side: the epoch file and what a slave does to its commitlog."""
