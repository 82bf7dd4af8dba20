"""Extension list and compiler flags; the metadata lives in pyproject.toml.

Every .pyx in a `_native` directory under fastmq/ (fastmq/_native, fastmq/kafka/_native, ...) becomes one
extension module named after its path (fastmq.kafka._native.records). Modules that wrap hand-written C kernels
name their csrc/ files in C_KERNELS. Protocol-only C headers live in their protocol's _native directory
(fastmq/kafka/_native/kafka_record.h), which is on every module's include path because a .pxd that names such a
header can be cimported from another package. FASTMQ_DEBUG=1 builds with line tracing, annotation and -O0 -g.
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
    sources = sorted((HERE / "fastmq").glob("**/_native/*.pyx"))
    include_dirs = ["csrc"] + sorted({str(pyx.parent.relative_to(HERE)) for pyx in sources})
    extensions = []
    for pyx in sources:
        name = pyx.stem
        if ONLY and name not in ONLY:
            continue
        source = pyx.relative_to(HERE)
        extensions.append(Extension(
            ".".join(source.with_suffix("").parts),
            sources=[str(source)] + C_KERNELS.get(name, []),
            include_dirs=include_dirs,
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
