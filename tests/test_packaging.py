"""What ``pip install .`` puts into a user's environment: ``mqstore`` and nothing else at the top.

The wheel is built from a copy of the checkout (its tracked files, links included) and installed
into a fresh virtual environment without dependencies: ``import mqstore`` loads none of them (the
public names load on first use), so the import name, the version, the kernels and the typing marker
can be checked without a network.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CARD = ("engine", "actors", "ipc", "pipeline", "scripts")

pytestmark = pytest.mark.slow


def _checkout_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        src, dst = ROOT / name, dest / name
        if not src.exists() and not src.is_symlink():  # deleted in the working tree, not yet committed
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(src.readlink())
        else:
            shutil.copy2(src, dst)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = _checkout_copy(tmp_path_factory.mktemp("checkout"))
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--disable-pip-version-check",
                           str(src), "-w", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [built] = out.glob("mqstore-*.whl")
    return built


def test_the_wheel_holds_mqstore_alone(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"mqstore"}
    assert "mqstore/py.typed" in names
    assert any(n.startswith("mqstore/engine/_native.") and n.endswith(".so") for n in names)
    assert "mqstore/actors/metrics/static/index.html" in names
    assert "mqstore/scripts/survival/power_cut/shim.c" in names  # the power-cut recorder, built on demand
    assert not any(n.startswith("mqstore/tests/") for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "mqstore = mqstore.scripts.cli.mqstore:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_mqstore_imports_by_its_one_name(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # -I: neither PYTHONPATH (the Spark tests put the checkout on it for their workers) nor the
    # current folder reaches sys.path, as for an application that only installed the wheel
    python = [str(venv / "bin" / "python"), "-I"]
    proc = subprocess.run([*python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--disable-pip-version-check", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    elsewhere = tmp_path / "elsewhere"  # not the checkout: nothing on sys.path but the venv
    elsewhere.mkdir()
    code = ("import mqstore, pathlib; root = pathlib.Path(mqstore.__file__).parent; "
            "print(mqstore.__version__, (root / 'py.typed').is_file(), sorted(mqstore.__all__)[:2])")
    done = subprocess.run([*python, "-c", code], cwd=elsewhere, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    version, typed, _ = done.stdout.split(" ", 2)
    assert version != "0+unknown" and typed == "True"
    for card in CARD:
        bare = subprocess.run([*python, "-c", f"import {card}"], cwd=elsewhere, capture_output=True, text=True,
                              timeout=60)
        assert bare.returncode != 0 and f"No module named '{card}'" in bare.stderr, (card, bare.stderr)
