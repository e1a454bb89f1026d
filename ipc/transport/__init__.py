"""How frames move: sockets with their limits stated, endpoints, CURVE, the client's channel."""
