"""How the per-record kernels are compiled, decided by measuring two means on one kernel.

    python -m mqstore.scripts.bench.kernel_choice [--records 100] [--body-bytes 128] [--rounds 20000]

The kernel is the writer's body-CRC check: RocketMQ's CRC (zlib's CRC-32, low 31 bits) of each body of a
batch. Measured in one run, each in a fresh interpreter: the Python loop over ``zlib.crc32`` that the
kernel replaced, the C extension ``mqstore.engine._native`` (built by ``pip install``), and a numba ``njit``
(cached, nogil) version of the same loop when numba is importable (``pip install numba`` to include it:
it is not a dependency). For each: ns per record, and what importing it costs a process (seconds to
import and make the first call, resident memory after) — every actor process pays that at start.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SETUP = """
import time, zlib, numpy as np, psutil
n, body, rounds = {records}, {body_bytes}, {rounds}
rng = np.random.default_rng(1)
data = rng.integers(0, 256, n * (body + 72), dtype=np.uint8).tobytes()
starts = np.arange(n, dtype=np.int64) * (body + 72) + 40
ends = starts + body
out = np.zeros(n, np.int64)
expected = [zlib.crc32(data[a:b]) & 0x7FFFFFFF for a, b in zip(starts.tolist(), ends.tolist())]
begin = time.perf_counter()
"""

_MEANS = {
    "python_zlib_loop": """
mv = memoryview(data)
def run():
    out[:] = np.array([zlib.crc32(mv[a:b]) for a, b in zip(starts.tolist(), ends.tolist())], np.int64) & 0x7FFFFFFF
""",
    "c_extension": """
from mqstore.engine import _native
def run():
    _native.crc31_spans(data, starts, ends, out)
""",
    "numba_njit": """
import numba
table = np.zeros((8, 256), np.uint32)  # slice-by-8, the tables the C kernel uses
for i in range(256):
    c = i
    for _ in range(8):
        c = (0xEDB88320 ^ (c >> 1)) if c & 1 else c >> 1
    table[0, i] = c
for i in range(256):
    for k in range(1, 8):
        table[k, i] = (table[k - 1, i] >> 8) ^ table[0, table[k - 1, i] & 0xFF]
@numba.njit(cache=True, nogil=True)
def crcs(d, s, e, o, t):
    for i in range(s.shape[0]):
        c = np.uint32(0xFFFFFFFF)
        j, end = s[i], e[i]
        while end - j >= 8:
            a = c ^ (np.uint32(d[j]) | np.uint32(d[j + 1]) << 8 | np.uint32(d[j + 2]) << 16 | np.uint32(d[j + 3]) << 24)
            b = np.uint32(d[j + 4]) | np.uint32(d[j + 5]) << 8 | np.uint32(d[j + 6]) << 16 | np.uint32(d[j + 7]) << 24
            c = (t[7, a & 0xFF] ^ t[6, (a >> 8) & 0xFF] ^ t[5, (a >> 16) & 0xFF] ^ t[4, a >> 24]
                 ^ t[3, b & 0xFF] ^ t[2, (b >> 8) & 0xFF] ^ t[1, (b >> 16) & 0xFF] ^ t[0, b >> 24])
            j += 8
        while j < end:
            c = t[0, (c ^ d[j]) & 0xFF] ^ (c >> 8)
            j += 1
        o[i] = np.int64(~c & 0x7FFFFFFF)
view = np.frombuffer(data, np.uint8)
def run():
    crcs(view, starts, ends, out, table)
""",
}

_MEASURE = """
run()
ready_s = time.perf_counter() - begin
assert out.tolist() == expected
t0 = time.perf_counter()
for _ in range(rounds):
    run()
ns = (time.perf_counter() - t0) / rounds / n * 1e9
print(round(ns, 1), round(ready_s, 3), psutil.Process().memory_info().rss)
"""


def measure(means: str, records: int, body_bytes: int, rounds: int) -> dict[str, object]:
    """One means in a fresh interpreter (a cache directory of its own for numba, warmed by a first run)."""
    code = _SETUP.format(records=records, body_bytes=body_bytes, rounds=rounds) + _MEANS[means] + _MEASURE
    with tempfile.TemporaryDirectory() as cache:
        script = Path(cache) / f"{means}.py"  # numba caches only what a file defines
        script.write_text(code)
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        runs = [subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
                for _ in range(2)]
    if runs[0].returncode:
        return {"error": runs[0].stderr.strip().splitlines()[-1]}
    ns, _, _ = _parse(runs[0].stdout)
    _, ready_cached, rss = _parse(runs[1].stdout)
    return {"ns_per_record": ns, "import_and_first_call_s": ready_cached, "rss_mb": round(rss / 1e6, 1)}


def _parse(text: str) -> tuple[float, float, int]:
    ns, ready, rss = text.split()
    return float(ns), float(ready), int(rss)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100, help="records a batch (default: %(default)s)")
    parser.add_argument("--body-bytes", type=int, default=128, help="bytes a body (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=20_000, help="batches timed (default: %(default)s)")
    args = parser.parse_args(argv)
    result = {name: measure(name, args.records, args.body_bytes, args.rounds) for name in _MEANS}
    print(json.dumps({"kernel": "body CRC of each record of a batch", "records": args.records,
                      "body_bytes": args.body_bytes, "means": result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
