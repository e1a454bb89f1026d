"""Lines of a stream in batches (``mqstore produce``'s stdin and ``--file``): every line exactly as
written, however the reads cut it, batches within their bounds, and the batch cut when the stream
has nothing more ready."""

from __future__ import annotations

import os
import threading
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.scripts.cli import line_batches as module
from mqstore.scripts.cli.line_batches import line_batches


def _written(data: bytes) -> int:
    """A pipe's read end holding ``data`` (small enough for the pipe's buffer) and then its end."""
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    os.close(write_end)
    return read_end


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"\n")), read_bytes=st.integers(1, 12),
       max_count=st.integers(1, 5), max_bytes=st.integers(1, 40))
def test_every_line_exactly_as_written_in_bounded_batches(data: bytes, read_bytes: int, max_count: int,
                                                          max_bytes: int) -> None:
    expected = data.split(b"\n")
    if expected[-1] == b"":
        expected.pop()  # input that ends with a newline has no empty line after it
    fd = _written(data)
    saved = module.READ_BYTES
    module.READ_BYTES = read_bytes  # lines cut across reads
    try:
        batches = list(line_batches(fd, max_count, max_bytes))
    finally:
        module.READ_BYTES = saved
        os.close(fd)
    assert [line for batch in batches for line in batch.lines] == expected
    for batch in batches:
        assert 1 <= len(batch.lines) <= max_count
        assert len(batch.lines) == 1 or sum(map(len, batch.lines)) <= max_bytes
    assert not batches or batches[-1].idle


def test_a_batch_is_cut_when_the_stream_has_nothing_more_ready() -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"typed\n")
    os.set_blocking(read_end, False)  # a read that would wait fails the test instead of hanging it
    batches = line_batches(read_end, 1000, 1 << 20)
    first = next(batches)  # the writer is still there: nothing waits for more lines or the end
    assert first.lines == [b"typed"] and first.idle
    os.write(write_end, b"more\nlast")
    os.close(write_end)
    assert [line for b in batches for line in b.lines] == [b"more", b"last"]
    os.close(read_end)


@pytest.mark.parametrize(("data", "lines"), [
    (b"a\r\nb", [b"a\r", b"b"]),
    (b"\n\n", [b"", b""]),
    (b"\xff\xfe\n", [b"\xff\xfe"]),
    (b"", []),
])
def test_what_a_line_is(data: bytes, lines: list[bytes]) -> None:
    fd = _written(data)
    try:
        assert [line for batch in line_batches(fd, 10, 100) for line in batch.lines] == lines
    finally:
        os.close(fd)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"\n")), read_bytes=st.integers(1, 12),
       max_line_bytes=st.integers(0, 20))
def test_a_line_past_the_bound_is_named_and_the_others_kept(data: bytes, read_bytes: int, max_line_bytes: int) -> None:
    every = data.split(b"\n")
    if every[-1] == b"":
        every.pop()
    fd = _written(data)
    saved = module.READ_BYTES
    module.READ_BYTES = read_bytes
    try:
        batches = list(line_batches(fd, 3, 40, max_line_bytes))
    finally:
        module.READ_BYTES = saved
        os.close(fd)
    kept = [line for line in every if len(line) <= max_line_bytes]
    assert [line for batch in batches for line in batch.lines] == kept
    assert [tuple(t) for batch in batches for t in batch.too_long] == [
        (number, len(line)) for number, line in enumerate(every, 1) if len(line) > max_line_bytes]
    assert all(batch.lines or batch.too_long for batch in batches)


def test_a_stream_without_newlines_is_never_held_past_the_bound() -> None:
    """64 MiB with no newline, then a short line: what is held stays near the 1 MiB bound."""
    read_end, write_end = os.pipe()
    long_size, bound = 64 << 20, 1 << 20

    def write() -> None:
        block = b"x" * (1 << 20)
        for _ in range(long_size // len(block)):
            os.write(write_end, block)
        os.write(write_end, b"\nnext\n")
        os.close(write_end)

    writer = threading.Thread(target=write)
    tracemalloc.start()
    writer.start()
    try:
        batches = list(line_batches(read_end, 1000, 1 << 20, bound))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        writer.join()
        os.close(read_end)
    assert [line for b in batches for line in b.lines] == [b"next"]
    assert [tuple(t) for b in batches for t in b.too_long] == [(1, long_size)]
    assert peak < bound + 4 * module.READ_BYTES  # the bound, a read and its split: not the 64 MiB line
