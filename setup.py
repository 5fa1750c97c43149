"""Build of the native core; the package metadata lives in pyproject.toml.

The extension is optional: where it cannot be compiled the package still installs and runs on
its pure-Python path (``pymtok.native.accelerate`` returns None).
"""

from pathlib import Path

from setuptools import Extension, setup

NATIVE = Path("src/pymtok/_native")

setup(
    ext_modules=[
        Extension(
            "pymtok._native",
            sources=[
                str(NATIVE / name)
                for name in (
                    "module.c", "pretok.c", "models.c", "normalize.c", "added.c", "tables.c", "mtok_tables.c", "decode.c",
                    "sentencepiece.c", "offsets.c", "regex.c",
                )
            ],
            depends=[str(NATIVE / name) for name in ("native.h", "unicode_data.h", "normalize_data.h", "mtok_tables.h")],
            # C11 for <stdatomic.h>; no -ffast-math: Unigram sums must round as HF's f64 ones
            extra_compile_args=["-std=c11", "-O3"],
            optional=True,
        )
    ],
)
