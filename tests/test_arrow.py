"""``Tokenizer.encode_arrow`` (an Arrow string column read from its buffers) and ``Tokenize`` on
Arrow batches: ids against HF ``tokenizers`` on the corpus, on every layout an Arrow string array
takes (string, large_string, chunked, sliced, with nulls), and what it refuses: nulls, bytes that
are not UTF-8, arrays whose offsets leave their buffers. Run on both paths (``PYMTOK_PURE=1``:
``to_pylist``), which must agree.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from conftest import corpus_chunks, examples, fixture_path, hf_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

import pymtok
from pymtok.integrations import Tokenize

pa = pytest.importorskip("pyarrow")

# byte-level BPE with added specials; WordPiece with a post-processor; SentencePiece-style BPE
NAMES = ["qwen3", "all-minilm-l6-v2", "mistral-7b-v0.1"]


@functools.lru_cache(maxsize=None)
def loaded(name: str) -> pymtok.Tokenizer:
    return pymtok.load(fixture_path("tokenizers", name))


def oracle(name: str, texts: list[str], special: bool = True) -> list[list[int]]:
    return [e.ids for e in hf_tokenizer(name).encode_batch(texts, add_special_tokens=special)]


def lists(flat: pymtok.tokenizer.FlatIds) -> list[list[int]]:
    return [list(flat.ids[a:b]) for a, b in zip(flat.offsets, flat.offsets[1:])]


def texts() -> list[str]:
    return corpus_chunks(400) + ["", " ", "<|im_end|> [SEP] text", "é\u0301 \U0001f600"]


def int32_buffer(values: list[int]) -> Any:
    return pa.array(values, pa.int32()).buffers()[1]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("special", [True, False])
def test_arrow_layouts_equal_hf(name: str, special: bool) -> None:
    tok = loaded(name)
    lines = texts()
    want = oracle(name, lines, special)
    third = len(lines) // 3
    layouts = {
        "string": pa.array(lines),
        "large_string": pa.array(lines, pa.large_string()),
        "chunked": pa.chunked_array([lines[:third], [], lines[third:]], pa.string()),
        "chunked large": pa.chunked_array([lines[:third], lines[third:]], pa.large_string()),
    }
    for layout, column in layouts.items():
        flat = tok.encode_arrow(column, add_special_tokens=special)
        assert lists(flat) == want, layout
        assert flat.ids.itemsize == 4 and flat.offsets.itemsize == 8 and flat.offsets[0] == 0
    # sliced (the array's offset is not 0), and chunks that are slices of one array
    whole = pa.array(["skipped"] * 5 + lines + ["skipped"] * 3)
    assert lists(tok.encode_arrow(whole.slice(5, len(lines)), add_special_tokens=special)) == want
    chunked = pa.chunked_array([whole.slice(5, third), whole.slice(5 + third, len(lines) - third)])
    assert lists(tok.encode_arrow(chunked, add_special_tokens=special)) == want
    assert tok.encode_arrow(layouts["string"], add_special_tokens=special, num_threads=1) == flat
    assert tok.encode_arrow(pa.array([], pa.string())) == tok.encode_batch([], return_flat=True)


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.binary(max_size=24) | st.text(max_size=24).map(lambda t: t.encode("utf-8", "surrogatepass")),
                max_size=10))
def test_arrow_bytes_are_decoded_as_python_does(values: list[bytes]) -> None:
    """Any bytes in a binary array viewed as string: the ids of the text Python's strict UTF-8
    decoding gives, or a TextError naming the first row and byte that it refuses."""
    tok = loaded("qwen3")
    column = pa.array(values, pa.binary()).view(pa.string())
    for row, value in enumerate(values):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as e:
            with pytest.raises(pymtok.TextError, match=rf"row {row} is not UTF-8 \(byte {e.start}\)"):
                tok.encode_arrow(column)
            return
    assert lists(tok.encode_arrow(column)) == oracle("qwen3", [v.decode("utf-8") for v in values])


def test_arrow_refuses_nulls_and_other_types() -> None:
    tok = loaded("qwen3")
    with pytest.raises(TypeError, match=r"row 2 is null \(encode\(\) takes a str\)"):
        tok.encode_arrow(pa.chunked_array([["a"], ["b", None, "c"]]))
    # a null's row counts from the slice's start
    with pytest.raises(TypeError, match="row 1 is null"):
        tok.encode_arrow(pa.array([None, "a", None]).slice(1))
    assert lists(tok.encode_arrow(pa.array([None, "a b", None]).slice(1, 1))) == oracle("qwen3", ["a b"])
    for column, kind in ((pa.array(["a"], pa.string_view()), "string_view"), (pa.array([b"a"]), "binary"),
                         (pa.array([1]), "int64")):
        with pytest.raises(TypeError, match=f"string or large_string column, got {kind}"):
            tok.encode_arrow(column)
    with pytest.raises(TypeError, match="pyarrow Array or ChunkedArray, got list"):
        tok.encode_arrow(["a"])
    with pytest.raises(TypeError, match="add_special_tokens"):
        tok.encode_arrow(pa.array(["a"]), add_special_tokens=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("wide", [False, True])
def test_arrow_hostile_offsets_are_refused(wide: bool) -> None:
    """Arrays pyarrow builds without a full validation: offsets that go back, start before the
    data, or (behind a slice) point past it are a ValueError, nothing read outside the buffers."""
    tok = loaded("qwen3")
    kind, width = (pa.large_string(), pa.int64()) if wide else (pa.string(), pa.int32())
    data = pa.py_buffer(b"hello world")

    def array(offsets: list[int], length: int, offset: int = 0) -> Any:
        return pa.Array.from_buffers(kind, length, [None, pa.array(offsets, width).buffers()[1], data], offset=offset)

    hostile = [
        array([0, 8, 3, 11], 3),          # back from 8 to 3
        array([0, -4, 11], 2),            # before the data
        array([0, 5, 11, 1 << 20, 11], 4),  # far past it, then back within
    ]
    for column in hostile:
        with pytest.raises(ValueError, match="encode_arrow\\(\\)"):
            tok.encode_arrow(column)
        with pytest.raises(ValueError, match="encode_arrow\\(\\)"):
            tok.encode_arrow(pa.chunked_array([pa.array(["fine"], kind), column]))
    # the same buffers with offsets that hold are read as they say
    assert lists(tok.encode_arrow(array([0, 5, 11], 2))) == oracle("qwen3", ["hello", " world"])
    assert lists(tok.encode_arrow(array([0, 5, 11], 1, offset=1))) == oracle("qwen3", [" world"])


def test_arrow_with_split_special_tokens_equals_encode() -> None:
    # split_special_tokens takes encode_batch's per-text path, on the native path too
    tok = pymtok.load(fixture_path("tokenizers", "qwen3"))
    tok.split_special_tokens = True
    lines = ["x<|im_end|>y", "plain"]
    assert lists(tok.encode_arrow(pa.array(lines))) == [tok.encode(t) for t in lines]


# -- Tokenize on Arrow batches ----------------------------------------------------------------


def test_tokenize_arrow_batches_equal_hf() -> None:
    pd = pytest.importorskip("pandas")
    tok = loaded("qwen3")
    lines = texts()
    want = oracle("qwen3", lines)
    fn = Tokenize(tok, attention_mask=True, length=True)
    table = pa.Table.from_batches([pa.record_batch({"text": lines[:50]}), pa.record_batch({"text": lines[50:]})])
    batches = {
        "table": table,
        "record batch": pa.record_batch({"text": pa.array(lines, pa.large_string()), "n": range(len(lines))}),
        "mapping": {"text": pa.array(lines)},
        "pandas str": pd.DataFrame({"text": pd.Series(lines, dtype="string[pyarrow]")}),
        "pandas list": pd.DataFrame({"text": pd.Series(lines, dtype=object)}),
    }
    for kind, batch in batches.items():
        out = fn(batch)
        ids = out["input_ids"]
        got = ids.to_pylist() if hasattr(ids, "to_pylist") else [list(x) for x in ids]
        assert got == want, kind
        lengths = out["length"]
        assert list(lengths.to_pylist() if hasattr(lengths, "to_pylist") else lengths) == [len(w) for w in want], kind
    out = fn(batches["record batch"])
    assert isinstance(out, pa.RecordBatch) and out.column_names == ["text", "n", "input_ids", "attention_mask", "length"]
    with pytest.raises(TypeError, match="row 1 is null"):
        fn(pa.table({"text": ["a", None]}))

