"""Tokenizing in data engines: ``encode_batch(return_flat=True)`` / ``count_batch`` against HF
``tokenizers``, the per-process cache of unpickled tokenizers, and ``pymtok.integrations`` on real
engines started here (a Ray local cluster, a Dask ``LocalCluster`` of 2 worker processes, HF
``datasets.map(num_proc=2)``), every record's ids compared with HF's on the model's own file.
"""

from __future__ import annotations

import functools
import pickle
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_chunks, corpus_dir, examples, fixture_path, hf_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

import pymtok
from pymtok import tokenizer as tokenizer_module
from pymtok.integrations import Tokenize, dask_tokenize

# byte-level BPE with added specials (qwen3); WordPiece with a post-processor ([CLS] ... [SEP])
NAMES = ["qwen3", "all-minilm-l6-v2"]
CORPUS_FILES = ["en_prose_botchan.txt", "ja_wagahaiwa_nekodearu.txt", "ru_udhr.txt", "code_python_cpython_stdlib.txt"]


@functools.lru_cache(maxsize=None)
def loaded(name: str) -> pymtok.Tokenizer:
    return pymtok.load(fixture_path("tokenizers", name))


def oracle_ids(name: str, texts: list[str], special: bool = True) -> list[list[int]]:
    return [e.ids for e in hf_tokenizer(name).encode_batch(texts, add_special_tokens=special)]


def corpus_lines(limit: int = 400) -> list[str]:
    """Lines of a few corpus files, as the engines' text readers cut them (empty ones left out)."""
    out: list[str] = []
    for name in CORPUS_FILES:
        lines = [line for line in (corpus_dir() / name).read_text(encoding="utf-8").split("\n") if line]
        out.extend(lines[:limit])
    return out


def unflatten(flat: Any) -> list[list[int]]:
    return [list(flat.ids[a:b]) for a, b in zip(flat.offsets, flat.offsets[1:])]


# -- flat batches -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("special", [True, False])
def test_flat_batch_and_counts_equal_hf(exported_mtok: Any, name: str, special: bool) -> None:
    tok = pymtok.load(exported_mtok(name))
    texts = corpus_chunks(400) + ["", " ", "<|im_end|> [SEP] text"]
    want = oracle_ids(name, texts, special)
    flat = tok.encode_batch(texts, add_special_tokens=special, return_flat=True)
    assert flat.ids.itemsize == 4 and flat.offsets.itemsize == 8
    assert flat.offsets[0] == 0 and len(flat.offsets) == len(texts) + 1
    assert unflatten(flat) == want
    assert list(tok.count_batch(texts, add_special_tokens=special)) == [len(w) for w in want]
    assert tok.encode_batch(texts, add_special_tokens=special, return_flat=True, num_threads=1) == flat


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.text(st.characters(exclude_categories=["Cs"]), max_size=40), max_size=12))
def test_flat_batch_of_any_texts_equals_hf(texts: list[str]) -> None:
    tok = loaded("qwen3")
    want = oracle_ids("qwen3", texts)
    assert unflatten(tok.encode_batch(texts, return_flat=True)) == want
    assert list(tok.count_batch(texts)) == [len(w) for w in want]


def test_flat_batch_of_pairs_and_special_keywords_equals_encode() -> None:
    tok = loaded("all-minilm-l6-v2")
    hf = hf_tokenizer("all-minilm-l6-v2")
    pairs = [("Hello there", "General Kenobi"), ("a", "b")]
    assert unflatten(tok.encode_batch(pairs, return_flat=True)) == [e.ids for e in hf.encode_batch(pairs)]
    assert list(tok.count_batch(pairs)) == [len(e.ids) for e in hf.encode_batch(pairs)]
    qwen = loaded("qwen3")
    texts = ["x<|im_end|>y", "plain"]
    flat = qwen.encode_batch(texts, split_special_tokens=True, return_flat=True)
    assert unflatten(flat) == [qwen.encode(t, split_special_tokens=True) for t in texts]


def test_flat_batch_refuses_what_encode_refuses() -> None:
    tok = loaded("qwen3")
    with pytest.raises(TypeError, match="takes a str"):
        tok.encode_batch(["a", 3], return_flat=True)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="lone surrogate"):
        tok.count_batch(["a", "b\ud800"])
    with pytest.raises(TypeError, match="return_flat"):
        tok.encode_batch(["a"], return_flat=1)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="unexpected keyword"):
        tok.count_batch(["a"], padding=True)
    with pytest.raises(TypeError, match="list of str"):
        tok.count_batch("abc")


def test_flat_batch_is_an_arrow_list_array(exported_mtok: Any) -> None:
    pa = pytest.importorskip("pyarrow")
    tok = pymtok.load(exported_mtok("qwen3"))
    texts = corpus_chunks(150)
    array = tok.encode_batch(texts, return_flat=True).to_arrow()
    assert array.type == pa.large_list(pa.uint32())
    assert array.to_pylist() == oracle_ids("qwen3", texts)


# -- shipping to workers ------------------------------------------------------------------


def test_unpickling_loads_a_file_once_per_process(exported_mtok: Any) -> None:
    tok = pymtok.load(exported_mtok("qwen3"))
    blob = pickle.dumps(tok)
    tokenizer_module._UNPICKLED.clear()
    first, second = pickle.loads(blob), pickle.loads(blob)
    assert len(tokenizer_module._UNPICKLED) == 1
    assert first is not second and first.model is second.model  # the tables loaded once
    # each copy has its own meta: what a user may change on one is not seen by the other
    first.set_chat_template("{{ messages[0]['content'] }}")
    first.split_special_tokens = True
    assert second.chat_template == tok.chat_template and second.split_special_tokens is False
    texts = corpus_chunks(150)
    assert second.encode_batch(texts) == oracle_ids("qwen3", texts)
    # the bytes (not the path) of the same file find the same tables
    assert pickle.loads(pickle.dumps(pymtok.mtok.loads_mtok(Path(exported_mtok("qwen3")).read_bytes()))).model is first.model


# -- the engines --------------------------------------------------------------------------


@pytest.mark.parametrize("batch_kind", ["mapping", "arrow"])
def test_datasets_map_num_proc_2(exported_mtok: Any, tmp_path: Path, batch_kind: str) -> None:
    datasets = pytest.importorskip("datasets")
    tok = pymtok.load(exported_mtok("all-minilm-l6-v2"))
    lines = corpus_lines(150)
    source = tmp_path / "corpus.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ds = datasets.load_dataset("text", data_files=str(source), split="train", cache_dir=str(tmp_path / "cache"))
    if batch_kind == "arrow":
        ds = ds.with_format("arrow")
    out = ds.map(Tokenize(tok, attention_mask=True, length=True), batched=True, num_proc=2, batch_size=64)
    out = out.with_format(None)
    want = oracle_ids("all-minilm-l6-v2", out["text"])
    assert out["text"] == lines
    assert out["input_ids"] == want
    assert out["attention_mask"] == [[1] * len(w) for w in want]
    assert out["length"] == [len(w) for w in want]


def test_dask_local_cluster_2_workers(exported_mtok: Any) -> None:
    dd = pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    pd = pytest.importorskip("pandas")
    tok = pymtok.load(exported_mtok("qwen3"))
    lines = corpus_lines(150)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster):
        frame = dd.from_pandas(pd.DataFrame({"text": lines}), npartitions=6)
        out = dask_tokenize(frame, tok, length=True).compute()
    assert out["text"].tolist() == lines
    want = oracle_ids("qwen3", lines)
    assert [list(ids) for ids in out["input_ids"]] == want
    assert out["length"].tolist() == [len(w) for w in want]


def test_pandas_arrow_dtype_batch(exported_mtok: Any) -> None:
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    tok = pymtok.load(exported_mtok("qwen3"))
    lines = corpus_lines(60)
    # an ArrowDtype column (pandas read with dtype_backend="pyarrow") is read through Arrow
    frame = pd.DataFrame({"text": pd.Series(lines, dtype=pd.ArrowDtype(pa.large_string())), "n": range(len(lines))})
    out = Tokenize(tok, length=True)(frame)
    want = oracle_ids("qwen3", lines)
    assert [list(ids) for ids in out["input_ids"]] == want
    assert out["length"].tolist() == [len(w) for w in want] and out["n"].tolist() == list(range(len(lines)))
    with pytest.raises(TypeError, match="takes a str"):
        Tokenize(tok)(pd.DataFrame({"text": pd.Series(["a", None], dtype=pd.ArrowDtype(pa.string()))}))


@pytest.fixture(scope="session")
def ray_cluster() -> Any:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow  # a Ray cluster's start is most of a minute
def test_ray_data_map_batches(exported_mtok: Any, ray_cluster: Any) -> None:
    tok = pymtok.load(exported_mtok("qwen3"))
    paths = [str(corpus_dir() / name) for name in CORPUS_FILES]
    ds = ray_cluster.data.read_text(paths)
    # half a CPU per actor: the two actors and the read tasks share the cluster's two
    out = ds.map_batches(
        Tokenize, fn_constructor_args=(tok,), concurrency=2, num_cpus=0.5, batch_size=256, batch_format="pyarrow"
    )
    rows = out.take_all()
    texts = [row["text"] for row in rows]
    expected_lines = sum(
        len([line for line in (corpus_dir() / name).read_text(encoding="utf-8").splitlines() if line])
        for name in CORPUS_FILES
    )
    assert len(rows) >= expected_lines
    assert [list(row["input_ids"]) for row in rows] == oracle_ids("qwen3", texts)
    # an instance instead of the class: tasks fused with the read, the tokenizer loaded once per
    # worker process (what bench/engines.py measures)
    tasks = ds.map_batches(Tokenize(tok), batch_size=256, batch_format="pyarrow").take_all()
    assert [list(row["input_ids"]) for row in tasks] == oracle_ids("qwen3", [row["text"] for row in tasks])
    assert len(tasks) == len(rows)


def test_tokenize_refuses_what_it_cannot_take(exported_mtok: Any) -> None:
    pa = pytest.importorskip("pyarrow")
    tok = pymtok.load(exported_mtok("qwen3"))
    with pytest.raises(TypeError, match="pymtok Tokenizer"):
        Tokenize("tok")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="attention_mask"):
        Tokenize(tok, attention_mask="yes")  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="no column 'text'"):
        Tokenize(tok)(pa.table({"body": ["a"]}))
    with pytest.raises(TypeError, match="a batch is"):
        Tokenize(tok)(["a"])
    with pytest.raises(TypeError, match="takes a str"):
        Tokenize(tok)({"text": ["a", None]})
