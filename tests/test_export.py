"""Exporting model folders: MNN's bytes exactly, and a file pymtok reads back exactly as HF."""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import unicodedata
from pathlib import Path

import pytest
from conftest import TOKENIZER_NAMES, corpus_chunks, fixture_path, golden_cases, hf_tokenizer, ours, slow_for
from test_mtok import MNN_ONLY_EXACT, reading_is_exact

import pymtok
from pymtok.errors import FormatError
from pymtok.export import export
from pymtok.mtok import EXTENSION_MAGIC, EXTENSION_VERSION, loads_mtok, read_mtok, write_mtok

# MNN can export everything but chatglm3-6b (its AutoTokenizer needs remote code)
WITH_REFERENCE = [n for n in TOKENIZER_NAMES if n != "chatglm3-6b"]
# The reference tables were built with Unicode 14.0 (Python 3.11): other versions differ there
USES_TABLES = {"albert-base-v2", "all-minilm-l6-v2", "bert-base-chinese", "clip-vit", "qwen3", "t5-small"}
SAMPLE = 200


@pytest.fixture(scope="module")
def exported(exported_mtok):
    return lambda name, mnn_identical=False: exported_mtok(name, mnn_identical).read_bytes()


def split_header(data: bytes) -> tuple[list[int], list[list[int]], bytes]:
    lines, pos = [], 0
    for _ in range(3):
        end = data.index(b"\n", pos)
        lines.append(data[pos:end])
        pos = end + 1
    counts = [int(x) for x in lines[1].split()]
    ids = [int(x) for x in lines[2].split()]
    s, p = counts[0], counts[1]
    return counts, [ids[:s], ids[s : s + p], ids[s + p :]], data[pos:]


@pytest.mark.parametrize("name", slow_for(WITH_REFERENCE, "gemma-v1"))
def test_body_and_header_match_mnn(name: str, exported) -> None:
    mine = exported(name, mnn_identical=True)
    ref = fixture_path("mnn-exported", name, "tokenizer.mtok").read_bytes()
    assert mine.startswith(b"430 4\n")
    counts, lists, body = split_header(mine)
    ref_counts, ref_lists, ref_body = split_header(ref)
    assert counts == ref_counts
    for mine, theirs in zip(lists, ref_lists):
        assert sorted(mine) == sorted(theirs)  # MNN's lists come from Python sets: order varies
    assert lists[2] == ref_lists[2]  # the prefix is an ordered id sequence
    if name in USES_TABLES and unicodedata.unidata_version != "14.0.0":
        pytest.skip(f"Unicode {unicodedata.unidata_version} tables differ from the reference's 14.0")
    # everything up to and including the post-processor program, then only our extension
    assert body[: len(ref_body)] == ref_body
    assert body[len(ref_body) :].startswith(EXTENSION_MAGIC)


def _sample(name: str) -> list[str]:
    return corpus_chunks(SAMPLE) + [text for text, _ in golden_cases(name)]


@functools.lru_cache(maxsize=2)
def mnn_reading(path: Path) -> pymtok.Tokenizer:
    """MNN's part of an export alone, what MNN's loader reads; shared by a model's tests."""
    return read_mtok(path, use_extension=False)


@pytest.mark.parametrize("name", slow_for(TOKENIZER_NAMES, "gemma-v1"))
def test_export_reads_back_exact(name: str, exported_tokenizer) -> None:
    tok = exported_tokenizer(name)
    hf = hf_tokenizer(name)
    from_json = ours(name)
    assert tok.meta == dataclasses.replace(from_json.meta, extension_version=EXTENSION_VERSION, mnn_layout="device")
    # transformers' clean-up and CLIP's suffix handling come on top of HF tokenizers' decode
    hf_decodes_alike = not (tok.meta.clean_up_tokenization_spaces or tok.meta.decode_suffix_as_space)
    for text in _sample(name):
        with_special = hf.encode(text, add_special_tokens=True).ids
        assert tok.encode(text, add_special_tokens=True) == with_special, text
        ids = hf.encode(text, add_special_tokens=False).ids
        assert tok.encode(text, add_special_tokens=False) == ids, text
        for skip in (False, True):
            decoded = tok.decode(with_special, skip_special_tokens=skip)
            assert decoded == from_json.decode(with_special, skip_special_tokens=skip)
            if hf_decodes_alike:
                assert decoded == hf.decode(with_special, skip_special_tokens=skip)
    for text, ids in golden_cases(name):
        assert tok.encode(text, add_special_tokens=False) == ids, text


# The device layout writes Punctuation as the Split it is and Roberta's <s> A </s> as a program
DEVICE_ONLY_EXACT = {**MNN_ONLY_EXACT, "falcon": True, "roberta-base": True}


@pytest.mark.parametrize("name", slow_for(TOKENIZER_NAMES, "gemma-v1"))
# the identical layout in the full tier: test_body_and_header_match_mnn shows it is MNN's file, whose
# reading test_mtok.py's test_mnn_exported_files_load checks
@pytest.mark.parametrize("mnn_identical", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_mnn_only_reading_of_export(name: str, mnn_identical: bool, exported) -> None:
    data = exported(name, mnn_identical)
    cut = data[: data.rfind(EXTENSION_MAGIC)]
    tok = loads_mtok(cut, name)
    assert reading_is_exact(tok, name) is (MNN_ONLY_EXACT if mnn_identical else DEVICE_ONLY_EXACT)[name]


@pytest.mark.parametrize("name", ["qwen3", "all-minilm-l6-v2", "t5-small"])
def test_rewriting_a_read_file(name: str, exported, exported_tokenizer, tmp_path: Path) -> None:
    data = exported(name)
    tok = exported_tokenizer(name)
    again = write_mtok(tok, tmp_path / "tokenizer.mtok").read_bytes()
    if name != "t5-small":
        assert again == data
    # a Unigram table now holds HF's reading of the scores (no overrides needed): still exact
    assert loads_mtok(again, name).config == tok.config


def test_export_writes_to_a_new_folder_and_file_loads(tmp_path: Path) -> None:
    out = export(fixture_path("tokenizers", "bert-base-chinese"), tmp_path / "a" / "b")
    assert out == tmp_path / "a" / "b" / "tokenizer.mtok"
    assert pymtok.load(out.parent).encode("你好") == read_mtok(out).encode("你好")


def test_txt_format_goes_to_legacy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Path, Path]] = []

    def export_txt(model_dir: Path, out_dir: Path) -> Path:
        calls.append((model_dir, out_dir))
        return out_dir / "tokenizer.txt"

    # a small vocabulary: the export loads it, and the check of the .txt compares two readings
    source = fixture_path("tokenizers", "bert-base-chinese")
    # the .txt read back as the source itself: nothing lost
    legacy = types.SimpleNamespace(export_txt=export_txt, read_txt=lambda path: pymtok.load(source))
    monkeypatch.setitem(sys.modules, "pymtok.legacy", legacy)
    assert export(source, tmp_path, format="txt") == tmp_path / "tokenizer.txt"
    assert calls == [(source, tmp_path)]
    assert not (tmp_path / "tokenizer.mtok").exists()


def test_folders_without_json_still_get_the_format_asked_for(tmp_path: Path) -> None:
    """format="mtok" (the default) never writes tokenizer.txt, whatever the folder holds."""
    source = fixture_path("legacy", "gpt2-vocab-merges")
    out = export(source, tmp_path)
    assert out == tmp_path / "tokenizer.mtok" and not (tmp_path / "tokenizer.txt").exists()
    txt = export(source, tmp_path / "txt", format="txt")
    assert txt.name == "tokenizer.txt"
    mtok, legacy_txt = pymtok.load(out), pymtok.load(txt)
    for text in ["Hello world", " two  spaces\n", "naïve café 12345"]:
        assert mtok.encode(text) == legacy_txt.encode(text)
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(pymtok.FormatError, match="no tokenizer"):
        export(bare, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="format"):
        export(fixture_path("tokenizers", "qwen3"), tmp_path, format="gguf")
    with pytest.raises(FileNotFoundError):
        export(tmp_path / "missing", tmp_path)


# gemma-v1's 256k vocabulary in the full tier; its header: test_mnn_identical_is_mnn_exporters_layout
@pytest.mark.parametrize("name", slow_for(TOKENIZER_NAMES, "gemma-v1"))
def test_device_layout_gives_mnn_hf_ids(name: str, exported_mtok, exported_tokenizer) -> None:
    """What MNN's encode() makes of the file's header and program (BEHAVIOR.md §2: the header's
    prefix list, then the text's ids, then the program over both) equals HF's ids with special
    tokens; encode(text, false) (prefix list + ids) HF's without; encode("") the tokenizer's prefix."""
    mnn = mnn_reading(exported_mtok(name))
    mine = exported_tokenizer(name)
    hf = hf_tokenizer(name)
    from_json = ours(name)
    assert mine.prefix_ids == from_json.prefix_ids  # pymtok's own reading keeps the real prefix

    def mnn_encode(ids: list[int], with_post_processor: bool = True) -> list[int]:
        ids = mnn.prefix_ids + ids
        return mnn.post_processor(ids) if with_post_processor and mnn.post_processor is not None else ids

    if mnn.post_processor is not None:
        assert mnn.prefix_ids == []  # the prefix is in exactly one place: the program
        if not hf.encode("", add_special_tokens=True).ids[len(from_json.prefix_ids):]:
            assert mnn_encode([]) == from_json.prefix_ids
    for text in corpus_chunks(40, seed=3):
        plain = hf.encode(text, add_special_tokens=False).ids
        assert mnn_encode(plain) == hf.encode(text, add_special_tokens=True).ids, text
        if mnn.post_processor is not None:
            assert mnn_encode(plain, with_post_processor=False) == plain, text


# gemma-v1 in the full tier: no other fast test exports its 256k vocabulary
@pytest.mark.parametrize("name", ["qwen3", "mistral-7b-v0.1", pytest.param("gemma-v1", marks=pytest.mark.slow)])
def test_device_layout_ends_mnn_part_where_the_extension_begins(name: str, exported, tmp_path: Path) -> None:
    data = exported(name)
    at = data.index(EXTENSION_MAGIC)
    body = tmp_path / "body.mtok"
    body.write_bytes(data[:at])
    # pymtok's reader walks MNN's sections as MNN's loader does and accepts no byte after the program
    read_mtok(body, use_extension=False)
    assert read_mtok(body).meta.extension_version is None
    with pytest.raises(pymtok.FormatError):
        pymtok.mtok.loads_mtok(data[:at] + b"\x00", name)


# mistral-7b-v0.1's two layouts are written for test_body_and_header_match_mnn and the tests above;
# gemma-v1's (256k vocabulary) only in the full tier
@pytest.mark.parametrize("name", ["mistral-7b-v0.1", pytest.param("gemma-v1", marks=pytest.mark.slow)])
def test_mnn_identical_is_mnn_exporters_layout(name: str, exported) -> None:
    """The device layout differs from MNN's exporter only where MNN's runtime gets the ids wrong:
    MNN's header lists the BOS HF puts before every text, the device layout's program adds it."""
    identical, device = exported(name, True), exported(name)
    counts, lists, _ = split_header(identical)
    device_counts, device_lists, _ = split_header(device)
    bos = hf_tokenizer(name).encode("", add_special_tokens=True).ids
    assert len(bos) == 1 and lists[2] == bos and device_lists[2] == [] and device_counts[:2] == counts[:2]


@pytest.mark.parametrize("name", slow_for(TOKENIZER_NAMES, "gemma-v1"))
def test_device_layout_gives_every_id_a_slot(name: str, exported_mtok, exported_tokenizer) -> None:
    """MNN's loader stores each vocabulary record at its id in a table of record-count slots:
    the ids MNN reads run 0..n-1 with no gap, and pymtok's own reading is the source's."""
    mnn_ids = sorted(mnn_reading(exported_mtok(name)).model.get_vocab().values())
    assert mnn_ids == list(range(len(mnn_ids)))
    mine, source = exported_tokenizer(name), ours(name)
    assert mine.get_vocab() == source.get_vocab() and mine.vocab_size == source.vocab_size
    gaps = sorted(set(range(len(mnn_ids))) - set(source.model.get_vocab().values()))
    assert (name == "gpt-4o") == bool(gaps)  # the fixtures' one sparse vocabulary
    assert all(mine.id_to_token(id) is None for id in gaps)
    hf = hf_tokenizer(name)
    assert mine.decode(gaps) == source.decode(gaps) == hf.decode(gaps) == ""
    between = [id for gap in gaps for id in (gap - 1, gap, gap + 1)]  # the native decoder's table holes
    assert mine.decode(between) == source.decode(between) == hf.decode(between, skip_special_tokens=False)


@pytest.mark.parametrize("name", ["gpt-4o"])  # run with gpt-4o's tests, which export it too
def test_mnn_identical_keeps_the_gaps(name: str, exported_mtok) -> None:
    ids = sorted(mnn_reading(exported_mtok(name, True)).model.get_vocab().values())
    assert ids[-1] + 1 > len(ids)  # MNN's exporter's bytes: its loader writes past its table here


def _mnn_wordpiece(vocab: dict[str, int], unk_id: int, prefix: str, max_chars: int, word: str) -> list[int]:
    """BEHAVIOR.md §7.2, MNN's WordPiece as its runtime runs it (byte offsets, unk never matched)."""
    data = word.encode("utf-8")
    if not data:
        return []
    if len(data) > max_chars:
        return [unk_id]
    out, start = [], 0
    while start < len(data):
        end, cur = len(data), -1
        while end > start:
            sub = (prefix.encode("utf-8") if start else b"") + data[start:end]
            id = vocab.get(sub.decode("utf-8", "surrogateescape"), -1)
            if id not in (-1, unk_id):
                cur = id
                break
            end -= 1
        if cur == -1:
            return [unk_id]
        out.append(cur)
        start = end
    return out


def test_word_level_runs_on_mnn_as_a_word_piece(tmp_path: Path) -> None:
    """MNN has no WordLevel model: the device layout writes it as a WordPiece whose prefix starts
    no token, which MNN's WordPiece (BEHAVIOR.md §7.2) runs to HF's WordLevel ids; pymtok reads it
    back as the WordLevel it is. MNN's own exporter has no layout for it."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    source = tmp_path / "source"
    source.mkdir()
    hf = Tokenizer(models.WordLevel(unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train_from_iterator(corpus_chunks(300, seed=5), trainers.WordLevelTrainer(vocab_size=2000, special_tokens=["<unk>"]))
    hf.save(str(source / "tokenizer.json"))
    hf = Tokenizer.from_file(str(source / "tokenizer.json"))
    data = export(source, tmp_path / "out").read_bytes()
    mine = loads_mtok(data, "wordlevel")
    assert mine.config["model"]["type"] == "WordLevel"
    # the model as MNN's runtime reads it (which drops the Whitespace pre-tokenizer: the words
    # below are HF's)
    model = loads_mtok(data[: data.rfind(EXTENSION_MAGIC)], "wordlevel").config["model"]
    assert model["type"] == "WordPiece"
    vocab = dict(model["vocab"])
    for text in corpus_chunks(40, seed=9) + ["", "   "]:
        expected = hf.encode(text).ids
        assert mine.encode(text) == expected, text
        words = [word for word, _ in hf.pre_tokenizer.pre_tokenize_str(text)]
        on_device = [id for word in words for id in _mnn_wordpiece(
            vocab, vocab[model["unk_token"]], model["continuing_subword_prefix"], model["max_input_chars_per_word"], word)]
        assert on_device == expected, text
    with pytest.raises(FormatError, match="WordLevel"):
        export(source, tmp_path / "identical", mnn_identical=True)


def test_a_vocabulary_giving_an_id_to_two_tokens_is_not_exported(tmp_path: Path) -> None:
    """HF loads it (and decodes the id to either token); a .mtok holds one token per id, so the
    export refuses it and writes nothing."""
    import json

    source = tmp_path / "source"
    source.mkdir()
    model = {"type": "BPE", "vocab": {"<unk>": 0, "a": 1, "b": 2, "(": 3, "{": 3, "ab": 4}, "merges": ["a b"],
             "unk_token": "<unk>"}
    (source / "tokenizer.json").write_text(json.dumps({"version": "1.0", "added_tokens": [], "model": model}))
    assert pymtok.load(source).encode("ab({") == [4, 3, 3]
    with pytest.raises(FormatError, match="id 3 is given to two tokens"):
        export(source, tmp_path / "out")
    assert not (tmp_path / "out" / "tokenizer.mtok").exists()
