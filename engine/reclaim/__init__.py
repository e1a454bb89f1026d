"""Reclamation and retention: which commitlog files are consumed, stragglers moved, and RocketMQ's disk watermarks."""
