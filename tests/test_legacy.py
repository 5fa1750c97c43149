"""Legacy tokenizer.txt (types 0-3): each type exact against the library its vocabulary came from."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from conftest import corpus_chunks, fixture_path

import pymtok
from pymtok import legacy
from pymtok.errors import FormatError

CHUNKS = 2000


@functools.lru_cache(maxsize=None)
def chunks() -> tuple[str, ...]:
    return tuple(corpus_chunks(CHUNKS))


def round_trip(src: legacy.LegacyTxt, tmp_path: Path, name: str) -> Path:
    """Write ``src``, parse it back, and check the second write is byte-identical."""
    path = src.write(tmp_path / name)
    again = legacy.parse_txt(path)
    assert again.to_bytes() == path.read_bytes()
    return path


def mismatches(expected: list[list[int]], tok: pymtok.Tokenizer, **kwargs: bool) -> list[str]:
    return [text for text, ids in zip(chunks(), expected) if tok.encode(text, **kwargs) != ids][:5]


# -- type 0: SentencePiece -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "kind"),
    [("test_model.model", "SentencePieceUnigram"), ("botchan_en_bpe_1000.model", "SentencePieceBPE"),
     ("mistral-7b-v0.1.model", "SentencePieceBPE")],
)
def test_sentencepiece_matches_the_library(model: str, kind: str, tmp_path: Path) -> None:
    spm = pytest.importorskip("sentencepiece")
    model_file = fixture_path("legacy", "sentencepiece", model)
    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    path = round_trip(legacy.from_sentencepiece(model_file), tmp_path, "tokenizer.txt")
    tok = legacy.read_txt(path, normalizer=legacy.sentencepiece_normalizer(model_file))
    assert type(tok.model).__name__ == kind  # the kind is read off the scores
    expected = [sp.encode(text) for text in chunks()]
    assert mismatches(expected, tok, add_special_tokens=False) == []
    # decode inverts encode wherever sentencepiece's does
    for text, ids in zip(chunks(), expected):
        if sp.decode(ids) == text:
            assert tok.decode(ids) == text
    # the file round-trips through read -> write -> read to the same ids
    again = legacy.read_txt(round_trip(legacy.parse_txt(path), tmp_path, "again.txt"),
                            normalizer=legacy.sentencepiece_normalizer(model_file))
    assert [again.encode(t, add_special_tokens=False) for t in chunks()[:200]] == expected[:200]


def test_sentencepiece_ties_whitespace_and_control_text(tmp_path: Path) -> None:
    """Exact ties, whitespace runs, NFKC input and control-piece text, where HF's conversion differs."""
    spm = pytest.importorskip("sentencepiece")
    for model in ("test_model.model", "botchan_en_bpe_1000.model", "mistral-7b-v0.1.model"):
        model_file = fixture_path("legacy", "sentencepiece", model)
        sp = spm.SentencePieceProcessor(model_file=str(model_file))
        path = legacy.from_sentencepiece(model_file).write(tmp_path / f"{model}.txt")
        tok = legacy.read_txt(path, normalizer=legacy.sentencepiece_normalizer(model_file))
        for text in ["-" * n for n in range(1, 40)] + [
            " " * 15, "x" + " " * 31 + "y", "  lead and trail  ", "a\u3000b", "ﬁ①Ａ", "e\u0301",
            "<s> </s> <unk>", "\u2581 \u2581", "", " ", "\u200b", "tab\tand\nnewline",
        ]:
            assert tok.encode(text, add_special_tokens=False) == sp.encode(text), (model, text)


def test_sentencepiece_header_prefix_and_kind_override(tmp_path: Path) -> None:
    model_file = fixture_path("legacy", "sentencepiece", "mistral-7b-v0.1.model")
    src = legacy.from_sentencepiece(model_file, add_bos=True)
    assert (src.special_ids, src.stop_ids, src.prefix_ids) == ([0, 1, 2], [2], [1])
    tok = legacy.read_txt(src.write(tmp_path / "t.txt"))
    ids = tok.encode("Hello world")
    assert ids[0] == 1 and tok.encode("Hello world", add_special_tokens=False) == ids[1:]
    assert tok.decode(ids) == "Hello world"  # control pieces decode to nothing, as in sentencepiece
    assert tok.meta.prefix_ids == [1] and tok.meta.stop_ids == [2]
    forced = legacy.read_txt(tmp_path / "t.txt", model_kind="unigram")
    assert type(forced.model).__name__ == "SentencePieceUnigram"
    with pytest.raises(ValueError):
        legacy.read_txt(tmp_path / "t.txt", model_kind="wordpiece")


# -- type 1: tiktoken ------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "pattern"), [("cl100k_base", legacy.CL100K_PATTERN), ("qwen", legacy.QWEN_PATTERN)])
def test_tiktoken_matches_the_library(name: str, pattern: str, tmp_path: Path) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    file = fixture_path("legacy", "tiktoken", f"{name}.tiktoken")
    enc = tiktoken.Encoding(name=f"pymtok-{name}", pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(str(file)), special_tokens={})
    path = round_trip(legacy.from_tiktoken(file), tmp_path, "tokenizer.txt")
    tok = legacy.read_txt(path, pattern=pattern)
    expected = [enc.encode_ordinary(text) for text in chunks()]
    assert mismatches(expected, tok) == []
    for text, ids in zip(chunks(), expected):
        assert tok.decode(ids) == enc.decode(ids)


@pytest.mark.parametrize("pattern", [
    # tiktoken reads Perl's quantifiers: x{1,3}+ possessive, x{2}? lazy; \pL a property
    r"\p{N}{1,3}+\d|\pL++|\s+(?!\S)|\s+|[^\s\pL\p{N}]+|\p{N}",
    r"(?:\p{N}{1,2}+\p{N})+|\p{N}|\pL+|\PL",
    r"\p{L}{2}?|\p{L}|\p{N}{1,2}+\p{N}|\p{N}|[^\pL\pN]",
    r"\p{L}+|\p{N}",  # tiktoken drops the text no match takes
])
def test_tiktoken_patterns_keep_perls_quantifiers(pattern: str) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    file = fixture_path("legacy", "tiktoken", "cl100k_base.tiktoken")
    enc = tiktoken.Encoding(name="pymtok-perl", pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(str(file)),
                            special_tokens={})
    tok = legacy.load_tiktoken(file, pattern=pattern)
    texts = [*chunks()[:40], "1234 123 12 99999 x1y22z333"]
    assert [text for text in texts if tok.encode(text) != enc.encode_ordinary(text)] == []


def test_tiktoken_source_saved_as_tokenizer_json_gives_hf_tiktokens_ids(tmp_path: Path) -> None:
    # cl100k's \p{N}{1,3}+ is possessive to tiktoken, a repeat of \p{N}{1,3} to HF's Oniguruma:
    # the saved file must say what tiktoken means
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe
    from tokenizers import Tokenizer as HFTokenizer

    file = fixture_path("legacy", "tiktoken", "cl100k_base.tiktoken")
    enc = tiktoken.Encoding(name="pymtok-cl100k", pat_str=legacy.CL100K_PATTERN,
                            mergeable_ranks=load_tiktoken_bpe(str(file)), special_tokens={})
    legacy.load_tiktoken(file).save(tmp_path / "tokenizer.json")
    hf = HFTokenizer.from_file(str(tmp_path / "tokenizer.json"))
    texts = [*chunks()[:40], "In 2024, 1234567 people paid $99.95 each."]
    assert [t for t in texts if hf.encode(t, add_special_tokens=False).ids != enc.encode_ordinary(t)] == []


def test_tiktoken_default_pattern_and_specials(tmp_path: Path) -> None:
    tok = legacy.read_txt(fixture_path("mnn-toy", "tt.txt"))
    # rank-ordered BPE, not MNN's greedy longest match: "abcd" is ab + cd (BEHAVIOR.md §10.2)
    assert tok.encode("abcd") == [256, 257]
    assert tok.encode("xabcdx<|end|>") == [120, 256, 257, 120, 260]
    assert tok.decode([120, 256, 257, 120, 260], skip_special_tokens=True) == "xabcdx"
    assert tok.meta.special_ids == [260] and tok.meta.stop_ids == [260]


# -- type 2: BERT ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "lowercase"),
    [(("legacy", "bert-vocab", "bert-base-cased-vocab.txt"), False), (("tokenizers", "all-minilm-l6-v2", "vocab.txt"), True)],
)
def test_bert_matches_hf(parts: tuple[str, ...], lowercase: bool, tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    vocab = fixture_path(*parts)
    hf = tokenizers.BertWordPieceTokenizer(str(vocab), lowercase=lowercase)
    path = round_trip(legacy.from_bert_vocab(vocab), tmp_path, "tokenizer.txt")
    tok = legacy.read_txt(path, lowercase=lowercase)
    expected = [hf.encode(text, add_special_tokens=False).ids for text in chunks()]
    assert mismatches(expected, tok) == []
    for ids in expected[:500]:
        for skip in (True, False):
            assert tok.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)
    assert tok.encode("[CLS] x [SEP]")[0] == tok.token_to_id("[CLS]")  # header specials are added tokens


# -- type 3: byte-level BPE from vocab.json + merges.txt -------------------------------------


def test_vocab_merges_matches_hf_and_llama_cpp(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    folder = fixture_path("legacy", "gpt2-vocab-merges")
    hf = tokenizers.ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    path = round_trip(legacy.from_vocab_merges(folder / "vocab.json", folder / "merges.txt"), tmp_path, "tokenizer.txt")
    tok = legacy.read_txt(path)
    expected = [hf.encode(text).ids for text in chunks()]
    assert mismatches(expected, tok) == []
    for ids in expected[:500]:
        assert tok.decode(ids) == hf.decode(ids)
    # llama.cpp's gpt-2 vocab test (conftest's golden_cases maps only tokenizers/ fixtures)
    base = fixture_path("golden", "llama.cpp", "ggml-vocab-gpt-2.gguf.inp")
    inputs = base.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    outputs = base.with_suffix(".out").read_text(encoding="utf-8").split("\n")[: len(inputs)]
    assert len(inputs) == 46
    for text, line in zip(inputs, outputs):
        assert tok.encode(text) == [int(x) for x in line.split()], text


def test_vocab_merges_accepts_mnn_version_line(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("430 3\n0 0 0\n\n4 2\na\nb\nab\nĠ\n#version: 0.2\na b\n", encoding="utf-8")
    assert legacy.read_txt(path).encode("ab") == [2]


# -- export from model folders ---------------------------------------------------------------


def _folder(tmp_path: Path, files: dict[str, Path]) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    for name, source in files.items():
        (folder / name).symlink_to(source)
    return folder


@pytest.mark.parametrize(
    ("files", "kind"),
    [
        ({"tokenizer.model": ("legacy", "sentencepiece", "test_model.model")}, legacy.SENTENCEPIECE),
        ({"qwen.tiktoken": ("legacy", "tiktoken", "qwen.tiktoken")}, legacy.TIKTOKEN),
        ({"vocab.txt": ("legacy", "bert-vocab", "bert-base-cased-vocab.txt")}, legacy.BERT),
        ({"vocab.json": ("legacy", "gpt2-vocab-merges", "vocab.json"),
          "merges.txt": ("legacy", "gpt2-vocab-merges", "merges.txt")}, legacy.HUGGINGFACE),
    ],
)
def test_export_txt_chooses_the_type(files: dict[str, tuple[str, ...]], kind: int, tmp_path: Path) -> None:
    folder = _folder(tmp_path, {name: fixture_path(*parts) for name, parts in files.items()})
    out = legacy.export_txt(folder, tmp_path / "out")
    assert out.name == "tokenizer.txt" and legacy.parse_txt(out).type == kind
    assert pymtok.load(out).encode("Hello world", add_special_tokens=False)


def test_export_txt_needs_a_vocabulary(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FormatError, match="nothing to export"):
        legacy.export_txt(tmp_path / "empty", tmp_path / "out")


# -- MNN's own files -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sp.txt", "sp_meta.txt", "tt.txt"])
def test_mnn_toy_files_load(name: str) -> None:
    tok = pymtok.load(fixture_path("mnn-toy", name))
    for text in ["hi", "hi hi", "abcd", "Hé ♞ 你好"]:
        ids = tok.encode(text)
        assert tok.decode(ids, skip_special_tokens=True) == text


def test_mnn_exported_spaces_are_read_as_metaspace() -> None:
    # sp.txt holds " hi" where sp_meta.txt holds "▁hi" (MNN's exporter, FORMAT.md §6.2)
    spaced = pymtok.load(fixture_path("mnn-toy", "sp.txt"))
    proper = pymtok.load(fixture_path("mnn-toy", "sp_meta.txt"))
    assert spaced.encode("hi hi") == [1, 263, 263]  # prefix [<s>] from the header, then ▁hi ▁hi
    assert proper.encode("hi hi") == [263, 263]


def test_convert_to_mtok(tmp_path: Path) -> None:
    for name, texts in (("tt.txt", ["abcd", "xabcdx<|end|>", "Hé ♞ 你好"]), ("sp_meta.txt", ["hi hi", " a  b ", "x"])):
        path = legacy.convert_txt_to_mtok(fixture_path("mnn-toy", name), tmp_path / name)
        source, converted = pymtok.load(fixture_path("mnn-toy", name)), pymtok.load(path)
        assert type(converted.model) is type(source.model)
        for text in texts:
            assert converted.encode(text) == source.encode(text)
            assert converted.decode(source.encode(text)) == source.decode(source.encode(text))


# -- malformed files -------------------------------------------------------------------------


GOOD_SP = "430 0\n1 0 0\n0 \n3\nPHVuaz4= 0.0 2\n4paB -1.0 1\naA== -2.0 1\n"


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("431 0\n0 0 0\n\n0\n", 1),  # bad magic
        ("430 7\n0 0 0\n\n0\n", 1),  # unknown type
        ("430 0\n1 x 0\n0\n3\n", 2),  # non-numeric counts
        ("430 0\n2 0 0\n0\n3\n", 3),  # fewer header ids than announced
        (GOOD_SP.replace("\n3\n", "\n5\n"), 8),  # short vocabulary
        (GOOD_SP.replace("4paB", "4p@B"), 6),  # bad base64
        (GOOD_SP.replace("-1.0", "minus-one"), 6),  # non-numeric score
        (GOOD_SP.replace(" 1\naA", " 9\naA"), 6),  # bad piece type
        (GOOD_SP.replace("4paB -1.0 1", "4paB"), 6),  # missing fields
        ("430 0\n1 0 0\n", 3),  # missing lines
        ("430 3\n0 0 0\n\n1 1\na\nab\n", 6),  # merge without a space
    ],
)
def test_malformed_files_name_the_line(content: str, line: int, tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError, match=f"line {line}:"):
        legacy.read_txt(path)


def test_good_minimal_file_reads(tmp_path: Path) -> None:
    path = tmp_path / "good.txt"
    path.write_text(GOOD_SP, encoding="utf-8")
    tok = legacy.read_txt(path)
    assert tok.encode("h") == [1, 2] and tok.decode([1, 2]) == "h"


@pytest.mark.parametrize("pattern", [legacy.CL100K_PATTERN, legacy.O200K_PATTERN, legacy.QWEN_PATTERN, legacy.LLAMA3_PATTERN])
def test_known_patterns_compile_as_split(pattern: str) -> None:
    from pymtok import pre_tokenizers

    split = pre_tokenizers.from_config({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False})
    assert split is not None
    assert "".join(piece for piece, _ in split([("Hello world's 12345!\n", 0)])) == "Hello world's 12345!\n"
