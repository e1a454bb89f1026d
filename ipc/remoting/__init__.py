"""Apache RocketMQ's TCP remoting protocol: frames, commands, codes, and a small blocking client."""
