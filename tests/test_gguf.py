"""GGUF files (llama.cpp's vocabulary-only fixtures): read exactly, exported exactly, fuzzed."""

from __future__ import annotations

import functools
import json
import os
import random
import struct
import warnings
from pathlib import Path

import pytest
from conftest import call_offsets, corpus_chunks, examples, fixture_path, hf_tokenizer, sentencepiece_offsets
from corruption import corrupted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymtok
from pymtok.errors import FormatError
from pymtok.gguf import PRE_TOKENIZERS, read_gguf, read_metadata
from pymtok.mtok import read_mtok, write_mtok

WITH_PAIRS = ["bert-bge", "deepseek-llm", "falcon", "gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2", "starcoder"]
# GGUF vocabulary -> the HF fixture folder of the same model's tokenizer (fixtures README)
HF_FOR = {
    "llama-bpe": "llama3", "qwen2": "qwen3", "falcon": "falcon", "phi-3": "phi-3-mini",
    "llama-spm": "phi-3-mini", "bert-bge": "all-minilm-l6-v2",
}
FAST, FULL = 150, 2000


def gguf_file(name: str) -> Path:
    return fixture_path("gguf", f"ggml-vocab-{name}.gguf")


@functools.lru_cache(maxsize=2)  # the large vocabularies are not all kept alive at once
def loaded(name: str) -> pymtok.Tokenizer:
    return pymtok.load(gguf_file(name))


@functools.lru_cache(maxsize=None)
def chunks(n: int) -> tuple[str, ...]:
    return tuple(corpus_chunks(n))


def golden(name: str) -> list[tuple[str, list[int]]]:
    base = gguf_file(name)
    inp = Path(f"{base}.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    out = Path(f"{base}.out").read_text(encoding="utf-8").split("\n")[: len(inp)]
    assert len(inp) == len(out) > 0
    return [(text, [int(x) for x in ids.split()]) for text, ids in zip(inp, out)]


def wrapping(name: str) -> tuple[list[int], list[int]]:
    """The ids llama.cpp puts around a text for this file: read from the metadata here, by the
    rules of llama_vocab::load (defaults by model and pre-tokenizer, then the add_* keys) and
    llama_vocab::tokenize (BERT: its BOS and SEP whatever the keys; the others: BOS and EOS by
    the keys, never SEP)."""
    v = read_metadata(gguf_file(name)).values
    model, pre = v["tokenizer.ggml.model"], v.get("tokenizer.ggml.pre")
    bos = v.get("tokenizer.ggml.bos_token_id", v.get("tokenizer.ggml.cls_token_id"))
    if model == "bert":
        return [bos], [v["tokenizer.ggml.seperator_token_id"]]
    add_bos = v.get("tokenizer.ggml.add_bos_token", model == "llama" or pre in ("llama-bpe", "llama3"))
    add_eos = v.get("tokenizer.ggml.add_eos_token", False)
    return [bos] if add_bos else [], [v["tokenizer.ggml.eos_token_id"]] if add_eos else []


@pytest.mark.parametrize("name", WITH_PAIRS)
def test_llama_cpp_test_pairs(name: str, tmp_path: Path) -> None:
    """The .inp/.out ids (HF's, reproduced by llama.cpp), loaded and exported -> loaded; then,
    from the same two readers (the large vocabularies take seconds to read and export), a corpus
    sample against the HF tokenizer of the same model where the fixtures have it."""
    tok = loaded(name)
    # export() of a GGUF file is load() then this write (the full-corpus test below calls export
    # itself, as does test_t5_unigram_gguf_is_sentencepiece_exact): the file is read once here
    exported = read_mtok(write_mtok(tok, tmp_path / "tokenizer.mtok"))
    prefix, suffix = wrapping(name)
    for reader in (tok, exported):
        for text, ids in golden(name):
            assert reader.encode(text, add_special_tokens=False) == ids, (name, text)
            assert reader.encode(text) == prefix + ids + suffix, (name, text)
    if name in HF_FOR or name == "gpt-2":
        _against_hf(name, FAST, exported)


def _against_hf(name: str, n: int, exported: pymtok.Tokenizer) -> None:
    if name == "gpt-2":
        tokenizers = pytest.importorskip("tokenizers")
        folder = fixture_path("legacy", "gpt2-vocab-merges")
        bpe = tokenizers.ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
        body = [bpe.encode(t).ids for t in chunks(n)]
    else:
        hf = hf_tokenizer(HF_FOR[name])
        body = [hf.encode(t, add_special_tokens=False).ids for t in chunks(n)]
    prefix, suffix = wrapping(name)
    cases = list(zip(chunks(n), body))
    if name == "llama-spm":
        # Llama 2's vocabulary compared with Phi-3's tokenizer.json, whose "</s>" eats the
        # whitespace after it (rstrip); Llama 2's does not, nor does llama.cpp for a model not
        # named Phi-3
        cases = [(t, ids) for t, ids in cases if "</s>" not in t]
    for reader in (loaded(name), exported):
        bad = [t for t, ids in cases if reader.encode(t, add_special_tokens=False) != ids]
        assert bad[:3] == [], name
        bad = [t for t, ids in cases if reader.encode(t) != prefix + ids + suffix]
        assert bad[:3] == [], name


@pytest.mark.slow
@pytest.mark.parametrize("name", [*HF_FOR, "gpt-2"])
def test_matches_the_hf_tokenizer_on_the_full_corpus_sample(name: str, tmp_path: Path) -> None:
    _against_hf(name, FULL, read_mtok(pymtok.export(gguf_file(name), tmp_path)))


def _library_model(name: str) -> bytes:
    """The file's llama vocabulary as a sentencepiece .model, for the library to give offsets
    of: its tokens, scores and types, BPE with byte fallback, the ▁ prefix as the file says, no
    charsmap, spaces kept. One UNKNOWN piece, the file's unknown id; its other UNKNOWN and
    USER_DEFINED tokens (phi-3's padding and "</s>") are pymtok's added tokens, CONTROL here,
    and texts holding an added token are not given to the library."""
    from sentencepiece import sentencepiece_model_pb2

    v = read_metadata(gguf_file(name)).values
    proto = sentencepiece_model_pb2.ModelProto()
    unk = v["tokenizer.ggml.unknown_token_id"]
    for i, (token, score, kind) in enumerate(
        zip(v["tokenizer.ggml.tokens"], v["tokenizer.ggml.scores"], v["tokenizer.ggml.token_type"])
    ):
        kind = 2 if i == unk else 3 if kind in (2, 3, 4) else kind
        proto.pieces.add(piece=token, score=score, type=kind)
    trainer = proto.trainer_spec
    trainer.model_type, trainer.byte_fallback = 2, True  # BPE
    trainer.unk_id, trainer.bos_id, trainer.eos_id, trainer.pad_id = unk, v["tokenizer.ggml.bos_token_id"], -1, -1
    spec = proto.normalizer_spec
    spec.name, spec.add_dummy_prefix = "identity", v.get("tokenizer.ggml.add_space_prefix", True)
    spec.remove_extra_whitespaces, spec.escape_whitespaces = False, True
    return proto.SerializeToString()


@pytest.mark.parametrize("name", ["llama-spm", "phi-3"])
def test_sentencepiece_vocabularies_give_the_librarys_offsets(name: str, tmp_path: Path) -> None:
    """Offsets of the llama (SentencePiece BPE) vocabularies are the library's on the same
    vocabulary (its ids checked equal first), read and exported; around an added token each side
    is normalized alone (a ▁ prefix of its own), as its ids are."""
    sentencepiece = pytest.importorskip("sentencepiece")
    sp = sentencepiece.SentencePieceProcessor(model_proto=_library_model(name))
    tok = loaded(name)
    added = [t["content"] for t in tok.config["added_tokens"]]
    hand = ("  Hello   world  ", "ﬁne ＡＢＣ \U0001f600\u0644\u064e", "\n", " \n x\t", "\u2581 \u2581\u2581x")
    texts = [t for t in (*chunks(FAST), *hand) if not any(a in t for a in added)]
    for reader in (tok, read_mtok(write_mtok(tok, tmp_path / "tokenizer.mtok"))):
        for text in texts:
            want = sentencepiece_offsets(sp, text)
            assert reader.encode(text, add_special_tokens=False) == [id for id, _, _ in want], text
            assert call_offsets(reader, text) == want, text
    left, right = "Hello  world", "ﬁne\U0001f600 x"
    shift = len(left) + len("<s>")
    assert call_offsets(tok, left + "<s>" + right) == [
        *sentencepiece_offsets(sp, left), (1, len(left), shift),
        *((id, start + shift, end + shift) for id, start, end in sentencepiece_offsets(sp, right)),
    ]



@functools.lru_cache(maxsize=2)
def loaded_pure(name: str) -> pymtok.Tokenizer:
    old = os.environ.get("PYMTOK_PURE")
    os.environ["PYMTOK_PURE"] = "1"
    try:
        return pymtok.load(gguf_file(name))
    finally:
        if old is None:
            del os.environ["PYMTOK_PURE"]
        else:
            os.environ["PYMTOK_PURE"] = old


@pytest.mark.skipif(os.environ.get("PYMTOK_PURE", "") not in ("", "0"), reason="PYMTOK_PURE disables the native core")
@pytest.mark.parametrize("name", ["llama-spm", "phi-3"])
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_added_tokens_of_a_sentencepiece_vocabulary_as_the_pure_path(name: str, data: st.DataObject) -> None:
    """A text holding none of the added tokens is one native call on the whole text, the others
    are split in Python: the ids are the pure path's either way, with the tokens, their first
    characters alone and texts with neither."""
    tok = loaded(name)
    assert tok._native_text is not None
    contents = sorted({t["content"] for t in tok.config["added_tokens"]})
    pieces = data.draw(st.lists(st.one_of(st.sampled_from(contents), st.sampled_from(["<", "[", "|", "s>", " ", "x"]),
                                          st.sampled_from(chunks(FAST)).map(lambda t: t[:40])), max_size=8))
    text = "".join(pieces)
    for special in (False, True):
        assert tok.encode(text, add_special_tokens=special) == loaded_pure(name).encode(text, add_special_tokens=special)


def test_metadata_into_the_pipeline() -> None:
    phi3 = loaded("phi-3")
    assert phi3.chat_template == read_metadata(gguf_file("phi-3")).values["tokenizer.chat_template"]
    assert phi3.meta.prefix_ids == [1] and 32000 in phi3.stop_ids
    assert phi3.meta.special_tokens["bos_token"] == "<s>"
    # every id keeps its place: byte tokens and all (gguf2mnn.py drops them and shifts ids)
    spm = loaded("llama-spm")
    assert spm.vocab_size == 32000 and spm.token_to_id("<0x0A>") == 13
    assert spm.encode("\n", add_special_tokens=False) == [29871, 13]
    bert = loaded("bert-bge")
    assert bert.encode("Hello World") == [101, 7592, 2088, 102]  # uncased, read off the vocabulary
    # CONTROL tokens are special added tokens, matched in text and skipped on decode
    qwen = loaded("qwen2")
    im_end = qwen.token_to_id("<|im_end|>")
    assert qwen.encode("a<|im_end|>", add_special_tokens=False)[-1] == im_end
    assert qwen.decode(qwen.encode("a<|im_end|>"), skip_special_tokens=True) == "a"


def test_unknown_or_missing_pre_tokenizer_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"tokenizer\.ggml\.pre.*missing"):
        read_gguf(gguf_file("gpt-neox"))
    path = tmp_path / "x.gguf"
    path.write_bytes(_gguf({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "no-such-pre",
                            "tokenizer.ggml.tokens": ["a", "b", "ab"], "tokenizer.ggml.merges": ["a b"]}))
    with pytest.raises(FormatError, match="'no-such-pre' is not supported"):
        pymtok.load(path)


# -- a minimal GGUF writer for synthetic files ------------------------------------------------


def _value(v: object) -> tuple[int, bytes]:
    if isinstance(v, bool):
        return 7, struct.pack("<?", v)
    if isinstance(v, int):
        return 4, struct.pack("<I", v)
    if isinstance(v, float):
        return 6, struct.pack("<f", v)
    if isinstance(v, str):
        raw = v.encode("utf-8")
        return 8, struct.pack("<Q", len(raw)) + raw
    assert isinstance(v, list) and v
    kind = _value(v[0])[0]
    if kind == 4 and any(x < 0 for x in v):  # type: ignore[operator]
        kind = 5
    body = b"".join(_value(x)[1] if kind != 5 else struct.pack("<i", x) for x in v)  # type: ignore[arg-type]
    return 9, struct.pack("<IQ", kind, len(v)) + body


def _gguf(values: dict[str, object]) -> bytes:
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(values))
    for key, v in values.items():
        raw = key.encode()
        kind, body = _value(v)
        out += struct.pack("<Q", len(raw)) + raw + struct.pack("<I", kind) + body
    return out


_SMALL_VALUES: dict[str, object] = {
    "general.architecture": "llama",
    "tokenizer.ggml.model": "gpt2",
    "tokenizer.ggml.pre": "qwen2",
    "tokenizer.ggml.tokens": ["a", "b", "ab", "Ġ", "Ġab", "<|end|>"],
    "tokenizer.ggml.token_type": [1, 1, 1, 1, 1, 3],
    "tokenizer.ggml.merges": ["a b", "Ġ ab"],
    "tokenizer.ggml.eos_token_id": 5,
    "tokenizer.ggml.add_bos_token": False,
}
SMALL = _gguf(_SMALL_VALUES)


def test_synthetic_file_reads() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.gguf"
        path.write_bytes(SMALL)
        tok = pymtok.load(path)
        assert tok.encode("ab ab<|end|>") == [2, 4, 5]
        assert tok.stop_ids == [5]


def test_remove_extra_whitespaces_changes_nothing_on_a_llama_file(tmp_path: Path) -> None:
    """llama.cpp applies the key to t5 (Unigram) vocabularies only; the golden ids of a llama
    vocabulary stay the same with it set."""
    values = dict(read_metadata(gguf_file("llama-spm")).values)
    values["tokenizer.ggml.remove_extra_whitespaces"] = True
    path = tmp_path / "spm.gguf"
    path.write_bytes(_gguf(values))
    tok = pymtok.load(path)
    for text, ids in golden("llama-spm"):
        assert tok.encode(text, add_special_tokens=False) == ids, text


def test_a_normal_token_a_key_names_stays_a_word(tmp_path: Path) -> None:
    """A pad id naming an ordinary token (fine-tunes set pad_token_id 0, "!" in Llama 3) does not
    make that token special: the ids are the file's without the key."""
    path = tmp_path / "pad.gguf"
    path.write_bytes(_gguf(dict(_SMALL_VALUES, **{"tokenizer.ggml.padding_token_id": 0})))
    tok = pymtok.load(path)
    assert tok.encode("ab ab<|end|>") == [2, 4, 5]
    untyped = {k: v for k, v in _SMALL_VALUES.items() if k != "tokenizer.ggml.token_type"}
    path.write_bytes(_gguf(dict(untyped, **{"tokenizer.ggml.padding_token_id": 0})))
    # with no token types, the ids the keys name are all that marks a special token
    assert pymtok.load(path).encode("ab ab<|end|>") == [0, 1, 3, 0, 1, 5]


def test_forged_counts_name_the_key_and_offset(tmp_path: Path) -> None:
    at = SMALL.index(b"tokenizer.ggml.tokens") + len("tokenizer.ggml.tokens") + 4 + 4
    forged = SMALL[:at] + struct.pack("<Q", 2**61) + SMALL[at + 8 :]
    path = tmp_path / "f.gguf"
    path.write_bytes(forged)
    with pytest.raises(FormatError, match=r"tokenizer\.ggml\.tokens at byte \d+: array of 2305843009213693952"):
        read_metadata(path)
    path.write_bytes(SMALL[:-3])
    with pytest.raises(FormatError, match=r"tokenizer\.ggml\.add_bos_token at byte \d+"):
        read_metadata(path)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2**60))
    with pytest.raises(FormatError, match="metadata entries cannot fit"):
        read_metadata(path)
    path.write_bytes(b"GGUF" + struct.pack("<I", 1))
    with pytest.raises(FormatError, match="version 1"):
        read_metadata(path)


def _load_or_format_error(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tok = pymtok.load(path)
        except FormatError:
            return
    tok.encode("ab ab<|end|> x")


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corrupt_files_are_format_errors(data: st.DataObject, tmp_path: Path) -> None:
    """Truncations, bit flips and forged 64-bit counts: a FormatError or a working tokenizer."""

    def forge_count(raw: bytearray, rng: random.Random) -> None:
        i = rng.randrange(len(raw) - 7)
        raw[i : i + 8] = struct.pack("<Q", rng.choice([2**32, 2**40, 2**63, 2**64 - 1]))

    path = tmp_path / "c.gguf"
    path.write_bytes(corrupted(SMALL, data.draw(st.randoms(use_true_random=False)), forge_count))
    _load_or_format_error(path)


def test_truncated_real_file_is_a_format_error(tmp_path: Path) -> None:
    data = gguf_file("bert-bge").read_bytes()
    for cut in (3, 20, 100, len(data) // 3, len(data) - 1):
        path = tmp_path / "t.gguf"
        path.write_bytes(data[:cut])
        with pytest.raises(FormatError, match="at byte"):
            pymtok.load(path)


@pytest.mark.parametrize("pre", sorted(PRE_TOKENIZERS))
def test_every_pre_tokenizer_name_builds_and_native_declines_what_it_does_not_know(pre: str, tmp_path: Path) -> None:
    """The native core scans a Split with a scanner written for exactly that pattern or with its
    regex engine where that takes the pattern (any other runs on the pure path, before the
    native model)."""
    from pymtok import native

    values = dict(_SMALL_VALUES, **{"tokenizer.ggml.pre": pre})
    path = tmp_path / "p.gguf"
    path.write_bytes(_gguf(values))
    tok = pymtok.load(path)
    steps = tok.config["pre_tokenizer"].get("pretokenizers") or [tok.config["pre_tokenizer"]]
    patterns = [s["pattern"]["Regex"] for s in steps if s["type"] == "Split"]
    if tok._native_text is not None:
        assert all(p in native.SCANNERS or native.engine_takes(p) for p in patterns)
    assert tok.encode("ab ab", add_special_tokens=False)[-1] == 4


def _converted(name: str, **keys: object) -> dict[str, object]:
    """The metadata llama.cpp's converter writes for a fixture's tokenizer.json (vocabulary,
    merges, token types, special ids), with ``keys`` added."""
    cfg = json.loads(fixture_path("tokenizers", name, "tokenizer.json").read_text(encoding="utf-8"))
    model = cfg["model"]
    tokens = [""] * len(model["vocab"])
    for token, i in model["vocab"].items():
        tokens[i] = token
    special = {a["id"] for a in cfg["added_tokens"] if a["special"]}
    values: dict[str, object] = {"tokenizer.ggml.token_type": [3 if i in special else 1 for i in range(len(tokens))]}
    if "merges" not in model:
        # word-initial pieces as "▁piece", continuations without "##"
        tokens = [t if i in special or (t.startswith("[") and t.endswith("]"))
                  else t[2:] if t.startswith("##") else "\u2581" + t for i, t in enumerate(tokens)]
        values["tokenizer.ggml.model"] = "bert"
    else:
        values["tokenizer.ggml.model"] = "gpt2"
        values["tokenizer.ggml.merges"] = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    values["tokenizer.ggml.tokens"] = tokens
    return {**values, **keys}


@pytest.mark.parametrize("add_sep_key", [True, False])
def test_roberta_gguf_adds_what_its_tokenizer_json_adds(add_sep_key: bool, tmp_path: Path) -> None:
    """RobertaProcessing makes the converter set add_bos, add_eos and add_sep (and llama.cpp
    defaults add_sep for roberta-bpe when the key is missing). llama.cpp's encode then adds <s>
    and </s> (never SEP to one text), and its rerank input puts </s> between the two texts of a
    pair: both what HF's RobertaProcessing gives."""
    keys: dict[str, object] = {
        "tokenizer.ggml.pre": "roberta-bpe", "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.seperator_token_id": 2, "tokenizer.ggml.padding_token_id": 1,
        "tokenizer.ggml.unknown_token_id": 3, "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_eos_token": True,
    }
    if add_sep_key:
        keys["tokenizer.ggml.add_sep_token"] = True
    path = tmp_path / "roberta.gguf"
    path.write_bytes(_gguf(_converted("roberta-base", **keys)))
    tok, hf = pymtok.load(path), hf_tokenizer("roberta-base")
    texts = list(chunks(40))
    for text in texts:
        assert tok.encode(text) == hf.encode(text).ids, text
    for a, b in zip(texts[::2], texts[1::2]):
        assert tok.encode(a, b) == hf.encode(a, b).ids, (a, b)


def test_bloom_split_is_the_one_its_tokenizer_json_has(tmp_path: Path) -> None:
    """llama.cpp's "bloom" regex against BLOOM's own pre-tokenizer (its Split pattern, a class
    with a class nested in it, then ByteLevel without its regex), on RoBERTa's byte-level
    vocabulary with either."""
    path = tmp_path / "bloom.gguf"
    path.write_bytes(_gguf(_converted("roberta-base", **{"tokenizer.ggml.pre": "bloom"})))
    cfg = json.loads(fixture_path("tokenizers", "roberta-base", "tokenizer.json").read_text(encoding="utf-8"))
    cfg["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": " ?[^(\\s|[.,!?…。，、।۔،])]+"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ]}
    cfg["post_processor"] = None
    hf = pytest.importorskip("tokenizers").Tokenizer.from_str(json.dumps(cfg))
    tok = pymtok.load(path)
    for text in [*chunks(60), "a.b,c!d?e…f。g，h、i।j۔k،l (m|n) o  p\tq"]:
        assert tok.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids, text


def test_mask_token_strips_the_space_before_it_where_llama_cpp_says(tmp_path: Path) -> None:
    """llama.cpp gives <mask> lstrip by the architecture (XLM-R based nomic-bert-moe, whose
    tokenizer.json says so, as RoBERTa's does): "a <mask>" as HF's RoBERTa reads it."""
    path = tmp_path / "nomic.gguf"
    path.write_bytes(_gguf(_converted(
        "roberta-base", **{"general.architecture": "nomic-bert-moe", "tokenizer.ggml.pre": "roberta-bpe",
                           "tokenizer.ggml.mask_token_id": 50264})))
    tok, hf = pymtok.load(path), hf_tokenizer("roberta-base")
    for text in ["a <mask> b", "<mask>", "x  <mask>y", "The capital of France is <mask>.", "\t<mask>\n"]:
        assert tok.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids, text


@pytest.mark.parametrize("lowercase", [None, True])
def test_bert_gguf_casing_comes_from_its_key_when_it_has_one(lowercase: bool | None, tmp_path: Path) -> None:
    """bert-base-chinese's vocabulary has uppercase words: without the converter's
    normalizer.lowercase key it is read as cased (its tokenizer.json's own setting), with the key
    set it lowercases as a tokenizer.json that says so; [CLS] A [SEP] and [CLS] A [SEP] B [SEP]."""
    keys: dict[str, object] = {"tokenizer.ggml.cls_token_id": 101, "tokenizer.ggml.seperator_token_id": 102}
    if lowercase is not None:
        keys["tokenizer.ggml.normalizer.lowercase"] = lowercase
    path = tmp_path / "bert.gguf"
    path.write_bytes(_gguf(_converted("bert-base-chinese", **keys)))
    cfg = json.loads(fixture_path("tokenizers", "bert-base-chinese", "tokenizer.json").read_text(encoding="utf-8"))
    cfg["normalizer"]["lowercase"] = bool(lowercase)
    hf = pytest.importorskip("tokenizers").Tokenizer.from_str(json.dumps(cfg))
    hf.no_padding()
    hf.no_truncation()
    tok = pymtok.load(path)
    assert tok.meta.source_notes == [
        "BERT vocabulary, uncased (tokenizer.ggml.normalizer.lowercase)" if lowercase
        else "BERT vocabulary, cased (read off the vocabulary: it has uppercase words)"]
    texts = [*chunks(40), "Hello World ÀÉÎ Straße"]
    for text in texts:
        assert tok.encode(text) == hf.encode(text).ids, text
    for a, b in zip(texts[::2], texts[1::2]):
        assert tok.encode(a, b) == hf.encode(a, b).ids, (a, b)


def test_t5_gguf_without_an_unknown_id_takes_llama_cpps_default(tmp_path: Path) -> None:
    """T5's <unk> is id 2 (0 is <pad>), llama.cpp's default for a t5 file without the key:
    characters T5 lacks come out as HF's t5-small gives them."""
    import base64

    cfg = json.loads(fixture_path("tokenizers", "t5-small", "tokenizer.json").read_text(encoding="utf-8"))
    pieces = cfg["model"]["vocab"] + [[a["content"], 0.0] for a in cfg["added_tokens"] if a["id"] >= len(cfg["model"]["vocab"])]
    path = tmp_path / "t5.gguf"
    path.write_bytes(_gguf({
        "general.architecture": "t5",
        "tokenizer.ggml.model": "t5",
        "tokenizer.ggml.tokens": [p for p, _ in pieces],
        "tokenizer.ggml.scores": [float(score) for _, score in pieces],
        "tokenizer.ggml.token_type": [2 if i == 2 else 3 if i < 2 or i >= 32000 else 1 for i in range(len(pieces))],
        "tokenizer.ggml.precompiled_charsmap": list(base64.b64decode(cfg["normalizer"]["precompiled_charsmap"])),
        "tokenizer.ggml.eos_token_id": 1,
        "tokenizer.ggml.add_eos_token": True,
    }))
    tok, hf = pymtok.load(path), hf_tokenizer("t5-small")
    for text in ["日本語 and 한국어", "a € b", "plain words"]:
        assert tok.encode(text) == hf.encode(text).ids, text


def test_t5_unigram_gguf_is_sentencepiece_exact(tmp_path: Path) -> None:
    """llama.cpp's t5 (UGM) metadata, made from SentencePiece's own Unigram test model: read and
    exported, the ids (and offsets) are sentencepiece's on that model (no t5 GGUF ships with the
    fixtures)."""
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2

    model = fixture_path("legacy", "sentencepiece", "test_model.model")
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.read_bytes())
    spec = proto.normalizer_spec
    path = tmp_path / "t5.gguf"
    path.write_bytes(_gguf({
        "general.architecture": "t5",
        "tokenizer.ggml.model": "t5",
        "tokenizer.ggml.tokens": [p.piece for p in proto.pieces],
        "tokenizer.ggml.scores": [float(p.score) for p in proto.pieces],
        "tokenizer.ggml.token_type": [int(p.type) for p in proto.pieces],
        "tokenizer.ggml.precompiled_charsmap": list(spec.precompiled_charsmap),
        "tokenizer.ggml.add_space_prefix": spec.add_dummy_prefix,
        "tokenizer.ggml.remove_extra_whitespaces": spec.remove_extra_whitespaces,
        "tokenizer.ggml.unknown_token_id": proto.trainer_spec.unk_id,
        "tokenizer.ggml.eos_token_id": proto.trainer_spec.eos_id,
        "tokenizer.ggml.add_bos_token": False,
        "tokenizer.ggml.add_eos_token": False,
    }))
    oracle = sentencepiece.SentencePieceProcessor(model_file=str(model))
    read, exported = pymtok.load(path), pymtok.load(pymtok.export(path, tmp_path / "out"))
    for text in corpus_chunks(150, seed=5) + ["  two  spaces ", "ｆｕｌｌ　ｗｉｄｔｈ ①"]:
        want = oracle.encode(text)
        assert read.encode(text) == want, text
        assert exported.encode(text) == want, text
        assert call_offsets(read, text) == sentencepiece_offsets(oracle, text), text
