"""JSON numbers as HF's loader reads them: serde_json without ``float_roundtrip`` (two roundings).

Unigram scores decide ties between segmentations to the ulp, so pymtok reads a tokenizer.json's
numbers as HF does and writes numbers HF reads back as exactly pymtok's values. The oracle is HF
itself: a Unigram vocabulary with the scores under test, loaded and written back by ``tokenizers``
(whose writer prints the shortest round-trip form, which Python reads exactly).
"""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pymtok.hf_json import serde_float, serde_literal

tokenizers = pytest.importorskip("tokenizers")


def hf_scores(literals: list[str]) -> list[float]:
    """The scores HF holds after reading ``literals`` as the scores of a Unigram vocabulary."""
    vocab = ", ".join(f'["<unk>", 0.0]' if i == 0 else f'["p{i}", {lit}]' for i, lit in enumerate(["0"] + literals))
    doc = ('{"version": "1.0", "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": false, '
           f'"vocab": [{vocab}]}}}}')
    back = json.loads(tokenizers.Tokenizer.from_str(doc).to_str())
    return [score for _, score in back["model"]["vocab"][1:]]


digits = st.text("0123456789", min_size=1, max_size=24)
literals = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole.lstrip('0') or '0'}{'.' + frac if frac else ''}{exp}",
    st.sampled_from(["", "-"]), digits, st.one_of(st.just(""), digits),
    st.one_of(st.just(""), st.integers(-30, 30).map(lambda e: f"e{e}")),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(literals, min_size=1, max_size=40))
def test_serde_float_reads_as_hf_does(batch: list[str]) -> None:
    assert [serde_float(lit) for lit in batch] == hf_scores(batch)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(
    st.floats(-40.0, 0.0, width=32),  # MNN stores Unigram scores as float32
    st.floats(-1e6, 1e6), literals.map(serde_float),
), min_size=1, max_size=40))
def test_serde_literal_is_read_back_exactly(values: list[float]) -> None:
    written = [(value, serde_literal(value)) for value in values]
    exact = [(value, lit) for value, lit in written if lit is not None]
    if exact:
        assert hf_scores([lit for _, lit in exact]) == [value for value, _ in exact]
    for value, lit in written:
        if lit is None:
            # no text reaches it: neither Python's repr nor any 17-20 digit significand near it
            assert serde_float(repr(value)) != value


def test_every_value_hf_reads_can_be_written_back() -> None:
    """Whatever serde_json produced from some text has a text pymtok finds (so a tokenizer.json
    read and written by pymtok keeps HF's scores); float32 scores nearly always have one."""
    for text in ("-2.0122928619384766", "-12.130167007446289", "1e-300", "-0.1", "123456789012345678901234.5"):
        value = serde_float(text)
        assert serde_float(serde_literal(value)) == value
    float32 = [struct.unpack("<f", struct.pack("<I", bits))[0] for bits in range(0xC0000000, 0xC2200000, 4099)]
    assert sum(serde_literal(v) is None for v in float32) < len(float32) // 100
