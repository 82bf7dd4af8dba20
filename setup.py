"""Extension list and compiler flags; the metadata lives in pyproject.toml.

Every fastmq/_native/*.pyx becomes one extension module. Modules that wrap hand-written C kernels name
their csrc/ files in C_KERNELS. FASTMQ_DEBUG=1 builds with line tracing, annotation and -O0 -g.
FASTMQ_ONLY=name,name builds just those modules (for working on one module while others are mid-edit).
"""
import os
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
DEBUG = os.environ.get("FASTMQ_DEBUG") == "1"
ONLY = {name for name in os.environ.get("FASTMQ_ONLY", "").split(",") if name}

C_KERNELS = {
    "checksum": ["csrc/crc32c.c", "csrc/crc32.c"],
    "hashing": ["csrc/murmur2.c", "csrc/xxhash.c"],
}

COMPILE_ARGS = ["-O0", "-g3"] if DEBUG else ["-O3"]
COMPILE_ARGS += ["-Wall", "-Wno-unused-function", "-Wno-unreachable-code-fallthrough", "-std=gnu11"]
MACROS = [("CYTHON_TRACE_NOGIL", "1")] if DEBUG else []


def native_extensions() -> list[Extension]:
    extensions = []
    for pyx in sorted((HERE / "fastmq" / "_native").glob("*.pyx")):
        name = pyx.stem
        if ONLY and name not in ONLY:
            continue
        extensions.append(Extension(
            f"fastmq._native.{name}",
            sources=[str(pyx.relative_to(HERE))] + C_KERNELS.get(name, []),
            include_dirs=["csrc"],
            extra_compile_args=COMPILE_ARGS,
            define_macros=MACROS,
        ))
    return extensions


setup(
    ext_modules=cythonize(
        native_extensions(),
        language_level=3,
        annotate=DEBUG,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
            "linetrace": DEBUG,
            "profile": DEBUG,
        },
    ),
)
