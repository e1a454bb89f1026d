"""Socket addresses as RocketMQ stores them: raw address bytes (4 for IPv4, 16 for IPv6) + a 4-byte port."""

from __future__ import annotations

import functools
import ipaddress
import struct
from dataclasses import dataclass

IPV4_HOST_SIZE = 8
IPV6_HOST_SIZE = 20


@dataclass(frozen=True, slots=True)
class Host:
    ip: str
    port: int

    @property
    def is_v6(self) -> bool:
        return ":" in self.ip

    @property
    def packed(self) -> bytes:
        """Address bytes followed by the port as a big-endian int: 8 bytes (IPv4) or 20 (IPv6)."""
        return _pack(self.ip, self.port)

    @classmethod
    def unpack(cls, data: bytes | memoryview) -> Host:
        """Inverse of ``packed``; the length (8 or 20) tells the family."""
        if len(data) not in (IPV4_HOST_SIZE, IPV6_HOST_SIZE):
            raise ValueError(f"host field must be 8 or 20 bytes, got {len(data)}")
        return _unpack(bytes(data))

    def __str__(self) -> str:
        return f"[{self.ip}]:{self.port}" if self.is_v6 else f"{self.ip}:{self.port}"


@functools.lru_cache(maxsize=256)
def _pack(ip: str, port: int) -> bytes:
    # every record carries two hosts, and a broker sees only a handful: parse each once
    return ipaddress.ip_address(ip).packed + struct.pack(">i", port)


LOCAL_HOST = Host("127.0.0.1", 10911)


@functools.lru_cache(maxsize=256)
def _unpack(data: bytes) -> Host:
    # every decoded record carries two hosts, and a store holds a handful: parse each once
    (port,) = struct.unpack(">i", data[-4:])
    return Host(str(ipaddress.ip_address(data[:-4])), port)
