"""The power-cut recorder on small real processes: what each sync made durable, the names made
durable by directory syncs, and crash images that hold only durable or live bytes, page by page."""

from __future__ import annotations

import itertools
import os
import random
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.scripts.survival.power_cut import images, shim
from mqstore.scripts.survival.power_cut.durable import Kind, read_record

SEEDS = range(40)
CHECKOUT = Path(__file__).resolve().parents[3]  # the children import mqstore from this checkout
PRELUDE = """
import mmap, os, subprocess, sys
ROOT = os.environ["MQSTORE_POWERCUT_ROOT"]

def write_file(name, data, sync=True):
    fd = os.open(os.path.join(ROOT, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd) if sync else None
    os.close(fd)

def sync_dir(name=""):
    fd = os.open(os.path.join(ROOT, name), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
"""


class Tree:
    """A root recorded by the shim, the record directory, and the live copy taken at the cut."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "root"
        self.record = base / "record"
        self.live = base / "live"
        self.root.mkdir()
        self.env = {**os.environ, **shim.env_for(self.record, self.root), "PYTHONPATH": str(CHECKOUT)}
        self.images = itertools.count()

    def run(self, body: str) -> None:
        script = self.base / "child.py"
        script.write_text(PRELUDE + "\n\ndef main():\n" + textwrap.indent(textwrap.dedent(body), "    ")
                          + "\n\nif __name__ == '__main__':\n    main()\n")
        subprocess.run([sys.executable, str(script)], env=self.env, check=True, timeout=120)

    def cut(self) -> None:
        shutil.copytree(self.root, self.live, symlinks=True)

    def durable(self) -> dict[str, bytes | None]:
        out = self.base / f"image{next(self.images)}"
        images.durable_image(self.record, self.live, out)
        return read_tree(out)

    def crash(self, seed: int) -> tuple[dict[str, bytes | None], images.ImageInfo]:
        out = self.base / f"image{next(self.images)}"
        info = images.crash_image(self.record, self.live, out, random.Random(seed))
        return read_tree(out), info

    def crashes(self) -> Iterator[tuple[dict[str, bytes | None], images.ImageInfo]]:
        return (self.crash(seed) for seed in SEEDS)

    def kinds(self) -> list[Kind]:
        return [event.kind for event in read_record(self.record).events]


def read_tree(top: Path) -> dict[str, bytes | None]:
    """Every path under top: a file's bytes, None for a directory."""
    return {path.relative_to(top).as_posix(): None if path.is_dir() else path.read_bytes()
            for path in sorted(top.rglob("*"))}


def assert_sectors(content: bytes, durable_bytes: bytes, live: bytes) -> None:
    """Each 512-byte sector is the durable one or the live one; the size is one of theirs."""
    assert len(content) in (len(durable_bytes), len(live))
    padded_durable = durable_bytes[:len(content)].ljust(len(content), b"\0")
    padded_live = live[:len(content)].ljust(len(content), b"\0")
    for start in range(0, len(content), images.SECTOR_SIZE):
        end = start + images.SECTOR_SIZE
        assert content[start:end] in (padded_durable[start:end], padded_live[start:end]), f"sector at {start}"


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def test_fsync_makes_the_bytes_then_written_durable_and_no_later_ones(tree: Tree) -> None:
    tree.run("""
        write_file("a", b"A" * 5000)
        sync_dir()
        fd = os.open(os.path.join(ROOT, "a"), os.O_WRONLY)
        os.pwrite(fd, b"B" * 3000, 4000)
        os.pwrite(fd, b"C" * 10, 0)
        os.close(fd)
    """)
    tree.cut()
    live = (tree.live / "a").read_bytes()
    assert tree.durable() == {"a": b"A" * 5000}
    taken, torn = 0, 0
    for files, info in tree.crashes():
        assert set(files) == {"a"}
        image = files["a"]
        assert image is not None
        assert_sectors(image, b"A" * 5000, live)
        taken += bool(info.files[0].pages)
        torn += info.torn is not None
    assert 0 < taken < len(SEEDS)
    assert torn > 0


def test_crash_images_are_deterministic_for_a_seed(tree: Tree) -> None:
    tree.run("""
        write_file("a", b"A" * 9000)
        sync_dir()
        write_file("a", b"B" * 20000, sync=False)
        write_file("b", b"new", sync=False)
    """)
    tree.cut()
    first, first_info = tree.crash(7)
    again, again_info = tree.crash(7)
    assert (first, first_info) == (again, again_info)


def test_msync_makes_its_range_durable_and_nothing_else_of_the_map(tree: Tree) -> None:
    tree.run("""
        fd = os.open(os.path.join(ROOT, "m"), os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(fd, 3 * 4096)
        os.fsync(fd)
        sync_dir()
        m = mmap.mmap(fd, 3 * 4096)
        m[0:2] = b"P0"
        m[8192:8194] = b"P2"
        m.flush(8192, 4096)
        m[4096:4098] = b"P1"
        m.close()
        os.close(fd)
    """)
    tree.cut()
    assert Kind.RANGE in tree.kinds()  # mmap.flush reached msync
    expected = bytearray(3 * 4096)
    expected[8192:8194] = b"P2"
    assert tree.durable() == {"m": bytes(expected)}
    live = (tree.live / "m").read_bytes()
    for files, _ in tree.crashes():
        image = files["m"]
        assert image is not None
        assert_sectors(image, bytes(expected), live)


def test_a_resized_map_and_the_engines_range_sync_and_sync_file_range_are_followed(tree: Tree) -> None:
    tree.run("""
        import ctypes
        from pathlib import Path
        from mqstore.engine.log.range_sync import RangeSync
        fd = os.open(os.path.join(ROOT, "grown"), os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(fd, 4096)
        m = mmap.mmap(fd, 4096)
        m.resize(2 * 4096)  # mremap: the map moves, the shim follows it
        m[4096:4101] = b"grown"
        m.flush(4096, 4096)
        m.close()
        os.close(fd)
        path = os.path.join(ROOT, "ranged")
        with open(path, "wb") as f:
            f.write(b"r" * 3 * 4096)
        ranged = RangeSync(Path(path), 3 * 4096)
        ranged.sync(4096, 8192)
        ranged.close()
        fd = os.open(os.path.join(ROOT, "sfr"), os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"s" * 8192)
        os.fsync(fd)
        os.pwrite(fd, b"t" * 8192, 0)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sync_file_range.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
        assert libc.sync_file_range(fd, 4096, 4096, 2 | 4) == 0  # SYNC_FILE_RANGE_WRITE | WAIT_AFTER
        os.close(fd)
        sync_dir()
    """)
    tree.cut()
    ranged = bytearray(3 * 4096)
    ranged[4096:8192] = b"r" * 4096
    grown = bytearray(2 * 4096)
    grown[4096:4101] = b"grown"
    assert tree.durable() == {"grown": bytes(grown), "ranged": bytes(ranged), "sfr": b"s" * 4096 + b"t" * 4096}


def test_a_synced_hole_and_a_synced_shrink_reach_the_durable_copy(tree: Tree) -> None:
    tree.run("""
        from mqstore.engine.log.mapped_file import _punch_hole
        for name in ("holed", "shrunk"):
            write_file(name, b"d" * 4 * 4096)
        sync_dir()
        fd = os.open(os.path.join(ROOT, "holed"), os.O_RDWR)
        assert _punch_hole(fd, 4096, 2 * 4096)
        os.fsync(fd)
        os.close(fd)
        fd = os.open(os.path.join(ROOT, "shrunk"), os.O_RDWR)
        os.ftruncate(fd, 4096 + 100)
        os.fdatasync(fd)
        os.ftruncate(fd, 4 * 4096)  # grown again with zeros, not synced
        os.close(fd)
    """)
    tree.cut()
    assert tree.durable() == {"holed": b"d" * 4096 + bytes(2 * 4096) + b"d" * 4096, "shrunk": b"d" * (4096 + 100)}
    for files, _ in tree.crashes():
        shrunk = files["shrunk"]
        assert shrunk is not None
        assert_sectors(shrunk, b"d" * (4096 + 100), b"d" * (4096 + 100) + bytes(3 * 4096 - 100))


@pytest.mark.parametrize("call", ["replace", "rename"])
@pytest.mark.parametrize("dir_synced", [False, True])
def test_rename_over_is_durable_only_after_the_directory_sync(tree: Tree, call: str, dir_synced: bool) -> None:
    tree.run(f"""
        write_file("cfg", b"old")
        sync_dir()
        write_file("cfg.tmp", b"new")
        os.{call}(os.path.join(ROOT, "cfg.tmp"), os.path.join(ROOT, "cfg"))
        if {dir_synced}:
            sync_dir()
    """)
    tree.cut()
    assert Kind.RENAME in tree.kinds()  # os.replace and os.rename reached the shim
    if dir_synced:
        assert tree.durable() == {"cfg": b"new"}
        assert all(files == {"cfg": b"new"} for files, _ in tree.crashes())
        return
    assert tree.durable() == {"cfg": b"old"}
    seen = {tuple(sorted(files.items())) for files, _ in tree.crashes()}
    allowed = {(("cfg", b"old"),), (("cfg", b"old"), ("cfg.tmp", b"new")), (("cfg", b"new"),)}
    assert seen == allowed


@pytest.mark.parametrize(("synced", "expected"), [
    ((), {}),
    (("d",), {}),                                   # its entry in the root is not durable
    (("",), {"d": None}),                           # the file's entry in d is not
    (("d", ""), {"d": None, "d/f": b"data"}),
])
def test_a_file_in_a_new_directory_needs_both_directory_syncs(
        tree: Tree, synced: tuple[str, ...], expected: dict[str, bytes | None]) -> None:
    tree.run(f"""
        os.mkdir(os.path.join(ROOT, "d"))
        write_file("d/f", b"data")
        for name in {synced!r}:
            sync_dir(name)
    """)
    tree.cut()
    assert tree.durable() == expected
    for files, _ in tree.crashes():
        assert files.get("d/f", b"data") == b"data"
        assert "d/f" not in files or "d" in files


def test_a_directory_renamed_moves_its_subtree_and_rmtree_removes_it_name_by_name(tree: Tree) -> None:
    tree.run("""
        import shutil
        os.makedirs(os.path.join(ROOT, "d", "e"))
        write_file("d/e/f", b"deep")
        for name in ("d/e", "d", ""):
            sync_dir(name)
        os.rename(os.path.join(ROOT, "d"), os.path.join(ROOT, "g"))
        sync_dir()
        shutil.rmtree(os.path.join(ROOT, "g"))  # unlinkat and rmdir relative to directory descriptors
    """)
    tree.cut()
    kinds = tree.kinds()
    assert kinds.count(Kind.UNLINK) == 1 and kinds.count(Kind.RMDIR) == 2
    assert tree.durable() == {"g": None, "g/e": None, "g/e/f": b"deep"}
    outcomes = set()
    for files, _ in tree.crashes():
        assert all(name.rpartition("/")[0] in files for name in files if "/" in name)
        outcomes.add(tuple(files))
    assert outcomes == {("g", "g/e", "g/e/f"), ("g", "g/e"), ("g",), ()}


@pytest.mark.parametrize("dir_synced", [False, True])
def test_an_unlink_is_durable_only_after_the_directory_sync(tree: Tree, dir_synced: bool) -> None:
    tree.run(f"""
        write_file("f", b"kept")
        sync_dir()
        os.unlink(os.path.join(ROOT, "f"))
        if {dir_synced}:
            sync_dir()
    """)
    tree.cut()
    assert tree.durable() == ({} if dir_synced else {"f": b"kept"})
    outcomes = {tuple(sorted(files.items())) for files, _ in tree.crashes()}
    assert outcomes == ({()} if dir_synced else {(), (("f", b"kept"),)})


def test_a_reused_inode_keeps_each_files_durable_bytes(tree: Tree) -> None:
    tree.run("""
        write_file("old", b"old bytes")
        sync_dir()
        for round in range(5):  # inode numbers freed here are handed out again at once
            os.unlink(os.path.join(ROOT, "old" if round == 0 else f"new{round - 1}"))
            write_file(f"new{round}", b"new bytes %d" % round)
    """)
    tree.cut()
    assert tree.durable() == {"old": b"old bytes"}
    for files, _ in tree.crashes():
        assert files.get("old", b"old bytes") == b"old bytes"
        for name, data in files.items():
            assert name == "old" or data == b"new bytes " + name[3:].encode()


def test_children_of_a_recorded_process_are_recorded(tree: Tree) -> None:
    tree.run("""
        import multiprocess
        subprocess.run([sys.executable, "-c", "import os\\n"
                        "fd = os.open(os.environ['MQSTORE_POWERCUT_ROOT'] + '/exec', os.O_WRONLY | os.O_CREAT)\\n"
                        "os.write(fd, b'exec'); os.fsync(fd)"], check=True)
        child = multiprocess.get_context("spawn").Process(target=write_file, args=("spawn", b"spawn"))
        child.start()
        child.join()
        assert child.exitcode == 0
        pid = os.fork()
        if pid == 0:
            write_file("fork", b"fork")
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        sync_dir()
    """)
    tree.cut()
    assert tree.durable() == {"exec": b"exec", "fork": b"fork", "spawn": b"spawn"}
    assert len({event.pid for event in read_record(tree.record).events}) == 4


def test_syncs_outside_the_root_pass_straight_through(tree: Tree) -> None:
    outside = tree.base / "outside"
    outside.mkdir()
    tree.run(f"""
        import errno
        out = {str(outside)!r}
        fd = os.open(out + "/f", os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"x" * 8192)
        os.fsync(fd)
        os.fdatasync(fd)
        m = mmap.mmap(fd, 8192)
        m[0:1] = b"y"
        m.flush()
        m.close()
        os.close(fd)
        os.replace(out + "/f", out + "/g")
        os.mkdir(out + "/d")
        os.rmdir(out + "/d")
        os.unlink(out + "/g")
        for call in (lambda: os.fsync(fd), lambda: os.replace(ROOT + "/missing", ROOT + "/x"),
                     lambda: os.unlink(ROOT + "/missing"), lambda: os.mkdir(ROOT)):
            try:
                call()
            except OSError as error:
                assert error.errno in (errno.EBADF, errno.ENOENT, errno.EEXIST), error
            else:
                raise AssertionError("a failing call succeeded")
    """)
    assert tree.kinds() == []
    assert list(outside.iterdir()) == []


def test_baseline_makes_what_was_there_durable(tree: Tree) -> None:
    (tree.root / "sub").mkdir()
    (tree.root / "sub" / "kept").write_bytes(b"k" * 5000)
    (tree.root / "gone").write_bytes(b"g")
    shim.baseline(tree.root, tree.record)
    tree.run("""
        with open(os.path.join(ROOT, "sub", "kept"), "r+b") as f:
            f.write(b"changed")
        os.unlink(os.path.join(ROOT, "gone"))
    """)
    tree.cut()
    assert tree.durable() == {"gone": b"g", "sub": None, "sub/kept": b"k" * 5000}
    for files, info in tree.crashes():
        assert files.get("gone", b"g") == b"g"
        kept = files["sub/kept"]
        assert kept is not None
        assert_sectors(kept, b"k" * 5000, b"changed" + b"k" * 4993)
        assert info.unrecorded == ()
