"""Stand-ins for the writer's sockets: what a round sends, gathered back into whole messages.

The writer sends a message a frame at a time (``mqstore.ipc.transport.sockets``: ``send_routed``,
``send_frames``, ``send_notice``); a stand-in that keeps whole messages in ``send_multipart`` gets them
through ``SentFrames.send``. ``Published`` keeps every message a PUB stand-in is sent."""

from __future__ import annotations

from typing import Any

import zmq

_SNDMORE = int(zmq.SNDMORE)


class SentFrames:
    """``send`` frame by frame; each message, once its last frame is in, to ``send_multipart``."""

    _partial: list[bytes] | None = None

    def send(self, frame: Any, flags: int = 0, copy: bool = True) -> None:
        if self._partial is None:
            self._partial = []
        self._partial.append(bytes(frame))
        if not int(flags) & _SNDMORE:
            frames, self._partial = self._partial, None
            self.send_multipart(frames)

    def send_multipart(self, frames: list[Any], flags: int = 0, copy: bool = True) -> None:
        raise NotImplementedError


class Published(SentFrames):
    """A PUB socket's stand-in: every message sent, in order."""

    def __init__(self) -> None:
        self.sent: list[list[Any]] = []

    def send_multipart(self, frames: list[Any], flags: int = 0, copy: bool = True) -> None:
        self.sent.append(frames)
