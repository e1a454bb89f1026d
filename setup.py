"""The compiled kernels (mqstore.engine._native), built by ``pip install`` with the machine's C compiler.

Everything else about the package is in pyproject.toml. In a checkout that is not the installed one,
``python3 setup.py build_ext --inplace`` builds the kernels beside the sources.
"""

from glob import glob

from setuptools import Extension, setup

setup(ext_modules=[Extension("mqstore.engine._native", sources=sorted(glob("engine/csrc/*.c")), depends=glob("engine/csrc/*.h"),
                             extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra"])])
