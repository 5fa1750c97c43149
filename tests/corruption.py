"""Corrupt copies of a file's bytes, the way the readers' robustness tests make them: cut short,
a few bits flipped, or a field forged (what the field is, each format's test says).

Used by tests/test_gguf.py, tests/test_sources.py and tests/mtok_mutations.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable


def flip_bits(data: bytearray, rng: random.Random, lo: int = 0, hi: int | None = None, most: int = 4) -> list[int]:
    """Flip one bit in each of 1 to ``most`` bytes of ``data[lo:hi]``; the offsets flipped."""
    end = len(data) if hi is None else hi
    spots = [rng.randrange(lo, end) for _ in range(rng.randint(1, most))]
    for at in spots:
        data[at] ^= 1 << rng.randrange(8)
    return spots


def corrupted(raw: bytes, rng: random.Random, forge: Callable[[bytearray, random.Random], None]) -> bytes:
    """``raw`` truncated, with a few bits flipped, or edited by ``forge``: one of the three, at random."""
    data = bytearray(raw)
    kind = rng.choice(["truncate", "flip", "forge"])
    if kind == "truncate":
        return bytes(data[: rng.randrange(len(data))])
    if kind == "flip":
        flip_bits(data, rng)
    else:
        forge(data, rng)
    return bytes(data)
