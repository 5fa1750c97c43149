"""SentencePiece ``.model`` files: read by pymtok's own protobuf reader, exact against ``sentencepiece``.

The oracle is ``sentencepiece.SentencePieceProcessor`` on the same bytes: ``encode`` (with
``add_bos``/``add_eos``) and ``decode``. Beside the three fixtures, models with the other
normalizer-spec fields are made by editing a fixture's proto with the package's
``sentencepiece_model_pb2`` (test-only), and loaded by both sides from the same bytes.
"""

from __future__ import annotations

import functools
import io
import math
import os
import random
import shutil
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import call_offsets, corpus_chunks, corpus_files, examples, fixture_path, full_tier, sentencepiece_offsets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymtok
from pymtok import native
from pymtok.errors import FormatError
from pymtok.export import export_report
from pymtok.mtok import write_mtok
from pymtok.sentencepiece import parse_model, read_model

spm = pytest.importorskip("sentencepiece")
model_pb2 = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")

MODELS = ["test_model.model", "botchan_en_bpe_1000.model", "mistral-7b-v0.1.model"]
KINDS = {"test_model.model": "SentencePieceUnigram", "botchan_en_bpe_1000.model": "SentencePieceBPE",
         "mistral-7b-v0.1.model": "SentencePieceBPE"}
DEFAULT_CHUNKS, SLOW_CHUNKS = 300, 2000


def model_path(name: str) -> Path:
    return fixture_path("legacy", "sentencepiece", name)


@functools.lru_cache(maxsize=None)
def chunks(count: int) -> tuple[str, ...]:
    return tuple(corpus_chunks(count))


@functools.lru_cache(maxsize=None)
def oracle(name: str) -> Any:
    return spm.SentencePieceProcessor(model_file=str(model_path(name)))


def proto_of(name: str) -> Any:
    proto = model_pb2.ModelProto()
    proto.ParseFromString(model_path(name).read_bytes())
    return proto


def mismatches(tok: pymtok.Tokenizer, sp: Any, texts: tuple[str, ...], **special: bool) -> list[str]:
    """Texts whose ids differ; ``special`` are sentencepiece's add_bos/add_eos (pymtok: add_special_tokens)."""
    on = any(special.values())
    return [t for t in texts if tok.encode(t, add_special_tokens=on) != sp.encode(t, **special)][:5]


def offset_mismatches(tok: pymtok.Tokenizer, sp: Any, texts: tuple[str, ...]) -> list[str]:
    return [t for t in texts if call_offsets(tok, t) != sentencepiece_offsets(sp, t)][:5]


def check_model(tok: pymtok.Tokenizer, sp: Any, texts: tuple[str, ...]) -> None:
    """Ids, decoding and offsets are the library's."""
    assert mismatches(tok, sp, texts) == []
    for ids in (sp.encode(t) for t in texts):
        assert tok.decode(ids) == sp.decode(ids)
    assert offset_mismatches(tok, sp, texts) == []


# -- the fixtures, loaded and exported -------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_fixture_loads_exactly(name: str) -> None:
    tok = pymtok.load(model_path(name))
    assert type(tok.model).__name__ == KINDS[name]
    check_model(tok, oracle(name), chunks(DEFAULT_CHUNKS))
    assert tok.encode("", add_special_tokens=False) == oracle(name).encode("") == []


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize(("bos", "eos"), [(True, False), (False, True), (True, True)])
def test_bos_and_eos(name: str, bos: bool, eos: bool) -> None:
    tok = read_model(model_path(name), add_bos=bos, add_eos=eos)
    texts = chunks(DEFAULT_CHUNKS)[:100] + ("", " ")
    assert mismatches(tok, oracle(name), texts, add_bos=bos, add_eos=eos) == []
    assert [tok.encode(t, add_special_tokens=False) for t in texts] == [oracle(name).encode(t) for t in texts]
    assert tok.meta.prefix_ids == ([oracle(name).bos_id()] if bos else [])
    assert tok.meta.stop_ids == [oracle(name).eos_id()]


@pytest.mark.parametrize("name", MODELS)
def test_export_then_load_is_exact(name: str, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(model_path(name), folder / "tokenizer.model")
    (folder / "tokenizer_config.json").write_text('{"add_bos_token": true, "add_eos_token": true}')
    from_folder = pymtok.load(folder)
    path, lost = export_report(folder, tmp_path / "out")
    assert path == tmp_path / "out" / "tokenizer.mtok" and lost == []
    exported = pymtok.load(path)
    assert type(exported.model).__name__ == KINDS[name]
    assert exported.config["normalizer"] == from_folder.config["normalizer"]
    assert exported.config["decoder"] == from_folder.config["decoder"]
    sp, texts = oracle(name), chunks(DEFAULT_CHUNKS)
    for tok in (from_folder, exported):
        assert mismatches(tok, sp, texts, add_bos=True, add_eos=True) == []
        for ids in (sp.encode(t) for t in texts):
            assert tok.decode(ids, clean_up_tokenization_spaces=False) == sp.decode(ids)
    # the file's transformers calls are transformers' (test_folder_call_and_decode_as_transformers)
    assert from_folder.meta.backend_decoder is not None
    assert (exported.meta.backend_decoder, exported.meta.backend_added_tokens) == (
        from_folder.meta.backend_decoder, from_folder.meta.backend_added_tokens)
    check_model(pymtok.load(export_report(model_path(name), tmp_path / "bare")[0]), sp, texts)
    # what was read back writes the same file again
    assert write_mtok(exported, tmp_path / "again.mtok").read_bytes() == path.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_fixture_and_export_on_2000_chunks(name: str, tmp_path: Path) -> None:
    sp, texts = oracle(name), chunks(SLOW_CHUNKS)
    with_specials = read_model(model_path(name), add_bos=True, add_eos=True)
    assert mismatches(with_specials, sp, texts, add_bos=True, add_eos=True) == []
    exported = pymtok.load(export_report(model_path(name), tmp_path)[0])
    check_model(exported, sp, texts)
    check_model(pymtok.load(model_path(name)), sp, texts)


@pytest.mark.skipif(os.environ.get("PYMTOK_PURE", "") not in ("", "0"), reason="PYMTOK_PURE disables the native core")
def test_native_core_runs_sentencepiece_models() -> None:
    """The library's normalizer and models in C (every test here then checks them against the
    library); added tokens and the post-processor stay in Python."""
    if native._core() is None:
        pytest.skip("the native core is not built")
    for name in MODELS:
        tok = pymtok.load(model_path(name))
        assert type(tok.normalizer).__name__ == "SentencePieceNormalizer"
        assert getattr(tok._native_segment, "__self__", None).__class__.__name__ == "SentencePieceModel"


@pytest.mark.skipif(os.environ.get("PYMTOK_PURE", "") not in ("", "0"), reason="PYMTOK_PURE disables the native core")
@pytest.mark.parametrize("name", MODELS)
def test_native_sentencepiece_keeps_no_utf8_on_the_callers_str(name: str) -> None:
    """Every native entry (the whole text, a segment, the normalizer alone) reads the caller's
    str without leaving a UTF-8 copy on it, which would double a long text's memory for as long
    as the caller keeps it."""
    if native._core() is None:
        pytest.skip("the native core is not built")
    tok, sp = pymtok.load(model_path(name)), oracle(name)
    # the library's wrapper caches UTF-8 on what it is given: it gets equal strs of its own
    text, its_text = "".join(chunks(40)), "".join(chunks(40))
    assert not text.isascii()
    size = sys.getsizeof(text)
    ids, normalized = tok.encode(text, add_special_tokens=False), tok.normalizer(text)
    assert sys.getsizeof(text) == size
    size = sys.getsizeof(normalized)
    segment_ids = tok._native_segment(normalized, 0)
    assert sys.getsizeof(normalized) == size
    assert ids == segment_ids == sp.encode(its_text)
    assert normalized == sp.normalize(its_text)

def test_txt_export_lists_its_losses(tmp_path: Path) -> None:
    path, lost = export_report(model_path("botchan_en_bpe_1000.model"), tmp_path, format="txt")
    assert path.name == "tokenizer.txt"
    assert any("charsmap" in item for item in lost) and any("remove_extra_whitespaces" in item for item in lost)
    with pytest.warns(UserWarning, match="not exact"):
        pymtok.export(model_path("test_model.model"), tmp_path / "t", format="txt")
    # mistral's spec is the one a type-0 file assumes: nothing lost, and the file is exact
    path, lost = export_report(model_path("mistral-7b-v0.1.model"), tmp_path / "m", format="txt")
    assert lost == []
    assert mismatches(pymtok.load(path), oracle("mistral-7b-v0.1.model"), chunks(DEFAULT_CHUNKS)[:150]) == []
    # what was lost is real: the botchan .txt differs from sentencepiece on real text
    txt = pymtok.load(tmp_path / "tokenizer.txt")
    assert mismatches(txt, oracle("botchan_en_bpe_1000.model"), chunks(DEFAULT_CHUNKS))


# -- Hypothesis strings ----------------------------------------------------------------------

# whitespace of every kind, NFKC-sensitive characters (ligatures, full-width, compatibility
# forms, combining marks), text of control pieces, ▁ itself, and characters only byte
# fallback can encode
_ALPHABET = list(" \t\n\r\u3000\u00a0\u2581\u200b") + list("ﬁﬂ①Ａｂ㌔ｶﾞ\u0301e\u0308Å") + list("ab-.,'") + [
    "<s>", "</s>", "<unk>", "<pad>", "\U0001f600", "\u4e0d", "\ud55c", "\u0e01", "\x00", "\x7f", "x", "q", "\u00e9",
]


def _texts() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(_ALPHABET) | st.text(max_size=3), max_size=24).map("".join)


@functools.lru_cache(maxsize=None)
def loaded(name: str) -> pymtok.Tokenizer:
    return pymtok.load(model_path(name))


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_texts())
def test_hypothesis_strings(name: str, text: str) -> None:
    tok, sp = loaded(name), oracle(name)
    ids = sp.encode(text)
    assert tok.encode(text, add_special_tokens=False) == ids
    assert tok.decode(ids) == sp.decode(ids)
    assert call_offsets(tok, text) == sentencepiece_offsets(sp, text)


@pytest.mark.parametrize("name", MODELS)
def test_decode_of_arbitrary_ids(name: str) -> None:
    """Control, unknown and byte pieces (invalid UTF-8 included) anywhere, as sentencepiece decodes them."""
    tok, sp = pymtok.load(model_path(name)), oracle(name)
    rng = random.Random(7)
    n = sp.get_piece_size()
    special = [i for i in range(n) if sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i)]
    for _ in range(300):
        ids = [rng.choice(special) if rng.random() < 0.4 else rng.randrange(n) for _ in range(rng.randrange(12))]
        assert tok.decode(ids) == sp.decode(ids), ids


# -- models with the other spec fields, edited from the fixtures ------------------------------


@functools.lru_cache(maxsize=None)
def trained_charsmap(rule: str) -> bytes:
    """The precompiled charsmap sentencepiece's trainer writes for ``rule``."""
    f = io.BytesIO()
    lines = corpus_files()[0][1].splitlines()[:500]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=f, vocab_size=120, normalization_rule_name=rule,
        minloglevel=3, hard_vocab_limit=False,
    )
    proto = model_pb2.ModelProto()
    proto.ParseFromString(f.getvalue())
    return bytes(proto.normalizer_spec.precompiled_charsmap)


def _spec(field: str, value: Any) -> Callable[[Any], None]:
    def edit(proto: Any) -> None:
        target = proto.trainer_spec if field == "treat_whitespace_as_suffix" else proto.normalizer_spec
        setattr(target, field, value)

    return edit


def _charsmap(rule: str) -> Callable[[Any], None]:
    def edit(proto: Any) -> None:
        proto.normalizer_spec.name = rule
        proto.normalizer_spec.precompiled_charsmap = trained_charsmap(rule) if rule != "identity" else b""

    return edit


def _retype(kind: int, pieces: list[str]) -> Callable[[Any], None]:
    def edit(proto: Any) -> None:
        by_text = {p.piece: p for p in proto.pieces}
        for text in pieces:
            if text in by_text:
                by_text[text].type = kind
            else:
                proto.pieces.add(piece=text, score=0.0, type=kind)

    return edit


def _unused_frequent(proto: Any) -> None:
    """Mark some multi-character pieces UNUSED: BPE merges into them and splits them back."""
    normal = [p for p in proto.pieces if p.type == 1 and len(p.piece) > 2]
    for p in normal[:40:3]:
        p.type = 5


USER = _retype(4, ["\u2581the", "ing", "<tag>", "a b", "\U0001f600", "12"])
# user-defined pieces inside the model's own pieces and each other, of one to six UTF-8 bytes
USER_INSIDE = _retype(4, ["he", "in", "ion", "ough", "er", "st", "\u00e9", "\u306e", "\u65e5\u672c", "ent", "nt",
                          "ment", "the", "e", "\u2581a", "s\u2581"])
EDITS: dict[str, list[Callable[[Any], None]]] = {
    "suffix": [_spec("treat_whitespace_as_suffix", True)],
    "suffix_no_prefix": [_spec("treat_whitespace_as_suffix", True), _spec("add_dummy_prefix", False)],
    "no_escape": [_spec("escape_whitespaces", False)],
    "no_escape_keep_spaces": [_spec("escape_whitespaces", False), _spec("remove_extra_whitespaces", False)],
    "keep_spaces": [_spec("remove_extra_whitespaces", False)],
    "no_dummy_prefix": [_spec("add_dummy_prefix", False)],
    "no_prefix_keep_spaces": [_spec("add_dummy_prefix", False), _spec("remove_extra_whitespaces", False)],
    "user_defined": [USER],
    "user_defined_keep_spaces": [USER, _spec("remove_extra_whitespaces", False)],
    "user_defined_inside": [USER_INSIDE],
    "unused": [_unused_frequent],
    "nfkc_cf": [_charsmap("nfkc_cf")],
    "nfkc": [_charsmap("nfkc")],
    "identity": [_charsmap("identity")],
    "control_text": [_retype(3, ["<ctl>", "\u2581a"])],
    # characters that are reserved or UNUSED pieces: text gives them the unknown id
    "control_chars": [_retype(3, ["x", "k", "\u2581", "\u00e9"])],
    "unused_chars": [_retype(5, ["q", "e", "\u4e0d"])],
    "unk_surface": [lambda p: setattr(p.trainer_spec, "unk_surface", "[?]")],
    "denormalizer": [lambda p: _denormalizer(p, "nfkc_cf")],
}


def _denormalizer(proto: Any, rule: str) -> None:
    """A denormalizer spec as the trainer writes one (its rules, no whitespace handling)."""
    spec = proto.denormalizer_spec
    spec.name, spec.precompiled_charsmap = rule, trained_charsmap(rule)
    spec.add_dummy_prefix = spec.remove_extra_whitespaces = spec.escape_whitespaces = False


@functools.lru_cache(maxsize=None)
def edited(base: str, edit: str) -> bytes:
    proto = proto_of(base)
    for step in EDITS[edit]:
        step(proto)
    return proto.SerializeToString()


_EDIT_TEXTS = (
    "Hello  world ", "  the thing is\tthat ", "a b", "x<tag>y the<tag>", "ﬁne Ｆｕｌｌ　ｗｉｄｔｈ ＡＢＣ",
    "Straße ΣΑΣ İstanbul", "\U0001f600 12 ing", "▁lead ▁▁ trail▁", "", " ", "<ctl> <s> </s> <unk>",
    "axb xx kxk q qq eqe \u00e9t\u00e9 \u4e0d\u662f",
    "e\u0301 \u00e9", "\u4e0d\u662f 한국어 \u0e01", "tab\tand\nnew\r\nline",
)


@pytest.mark.parametrize("base", ["botchan_en_bpe_1000.model", "test_model.model"])
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_edited_models(base: str, edit: str, tmp_path: Path) -> None:
    data = edited(base, edit)
    path = tmp_path / "edited.model"
    path.write_bytes(data)
    sp = spm.SentencePieceProcessor(model_proto=data)
    texts = _EDIT_TEXTS + chunks(DEFAULT_CHUNKS)[:60]
    tok = pymtok.load(path)
    check_model(tok, sp, texts)
    exported = pymtok.load(export_report(path, tmp_path / "out")[0])
    check_model(exported, sp, texts)
    rng = random.Random(edit)
    n = sp.get_piece_size()
    for _ in range(100):
        ids = [rng.randrange(n) for _ in range(rng.randrange(8))]
        assert tok.decode(ids) == sp.decode(ids), ids


@pytest.mark.parametrize("edit", ["suffix", "keep_spaces", "user_defined", "user_defined_inside", "nfkc_cf", "no_escape",
                                  "unused", "control_chars", "unused_chars"])
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_texts())
def test_edited_models_hypothesis(edit: str, text: str) -> None:
    for base in ("botchan_en_bpe_1000.model", "test_model.model"):
        data = edited(base, edit)
        tok, sp = _loaded(data), _sp(data)
        assert tok.encode(text, add_special_tokens=False) == sp.encode(text), (base, text)
        assert call_offsets(tok, text) == sentencepiece_offsets(sp, text), (base, text)


# -- long texts, which the native core normalizes and encodes a part at a time ----------------

# code points of raw text module.c's SentencePieceModel.encode_text reads at a time (SP_PART)
PART = 1 << 16
# what a cut may fall inside: space runs, a letter and its accent (a charsmap key of two
# characters), full-width forms and U+3000, user-defined pieces (one with a space), U+2581 itself,
# characters a small vocabulary lacks (runs of unknowns), line breaks
_AT_CUTS = ("   ", " x ", "e\u0301 ", "\ufb01ne", "\uff26\uff55\u3000\uff57", "x<tag>y a b ", "\u2581the \u2581\u2581 ",
            "\U0001f600 12ing", "\u0e01\u0e02 \u0416\u0416 \u0416", "\t\n \r\n", "\u4e0d\u662f\u4e0d", "ab  cd")


def _cut_text(rng: random.Random, cuts: int, filler: str) -> str:
    """A text whose part boundaries each fall at some position inside one of ``_AT_CUTS``."""
    out: list[str] = []
    size = 0
    for k in range(1, cuts + 1):
        snippet = rng.choice(_AT_CUTS)
        into = rng.randrange(len(snippet) + 1)
        need = k * PART - into - size
        while need > 0:
            piece = filler[rng.randrange(len(filler)) :][:need]
            out.append(piece)
            size += len(piece)
            need -= len(piece)
        out.append(snippet)
        size += len(snippet)
    return "".join(out) + " the end  "


def _long_texts(seed: str, cuts: int) -> list[str]:
    rng = random.Random(seed)
    filler = " ".join(text[:4000] for _, text in corpus_files())
    return [
        _cut_text(rng, cuts, filler),
        " " * (PART + 7) + "lead in" + " " * (2 * PART + 3),
        "\u4e0d\u662f" * PART + " x",
        ("a" * 70 + " ") * (PART // 30),
        # runs no cut can fall in (every position inside a piece), and escaped spaces the end strips
        "x " + "-" * (PART + 5) + " y",
        "\u2581 " * PART,
    ]


LONG_EDITS = ["", "user_defined", "keep_spaces", "suffix", "nfkc_cf", "no_escape", "no_prefix_keep_spaces", "identity"]


@pytest.mark.parametrize("base", MODELS)
@pytest.mark.parametrize("edit", LONG_EDITS)
def test_long_texts_in_parts_are_the_librarys(base: str, edit: str) -> None:
    """Texts of many parts, every cut inside something the normalizer or the model sees across
    it, and whitespace or unbroken runs longer than a part: BPE's ids are the library's, and a
    Unigram model (whose Viterbi runs on the whole normalized text) gets the library's
    normalization of the whole."""
    pure = os.environ.get("PYMTOK_PURE", "") not in ("", "0")
    if edit and base.startswith("mistral") or not full_tier() and (pure or edit not in ("", "user_defined", "keep_spaces")):
        pytest.skip("the full tier edits the small models in every way and runs the pure path; the fast one in three")
    data = edited(base, edit) if edit else model_path(base).read_bytes()
    tok, sp = _loaded(data), _sp(data)
    # the pure path reads no parts: it meets the same texts, fewer cuts of them
    for text in _long_texts(f"{base}/{edit}", 3 if pure else 12 if full_tier() else 5):
        assert tok.encode(text, add_special_tokens=False) == sp.encode(text), (base, edit, len(text))


@pytest.mark.slow
def test_unigram_on_a_text_of_many_thousand_tokens_is_the_librarys() -> None:
    """Past about 27,000 tokens (a path sum of -100,000) the library's sums restart at the start
    reached: token 27,887 on is '\u2581so r t' here, where float32 sums kept from the text's
    start give '\u2581s or t'."""
    data = model_path("test_model.model").read_bytes()
    rng = random.Random("test_model.model/")
    filler = " ".join(text[:4000] for _, text in corpus_files())
    text = _cut_text(rng, 12, filler)
    assert _loaded(data).encode(text, add_special_tokens=False) == _sp(data).encode(text)


@functools.lru_cache(maxsize=None)
def _loaded(data: bytes) -> pymtok.Tokenizer:
    from pymtok.sentencepiece import tokenizer_config

    return pymtok.Tokenizer.from_config(tokenizer_config(parse_model(data)))


@functools.lru_cache(maxsize=None)
def _sp(data: bytes) -> Any:
    return spm.SentencePieceProcessor(model_proto=data)


def test_byte_fallback_user_defined_model(tmp_path: Path) -> None:
    """Mistral (byte fallback, identity) with user-defined pieces and whitespace collapsing."""
    proto = proto_of("mistral-7b-v0.1.model")
    USER(proto)
    proto.normalizer_spec.remove_extra_whitespaces = True
    data = proto.SerializeToString()
    path = tmp_path / "m.model"
    path.write_bytes(data)
    check_model(pymtok.load(path), spm.SentencePieceProcessor(model_proto=data), _EDIT_TEXTS + chunks(DEFAULT_CHUNKS)[:100])


# -- Unigram's lattice: user-defined pieces, the score reset ----------------------------------

UNIGRAM = 1  # TrainerSpec.model_type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6  # ModelProto.SentencePiece.type


def _unigram(pieces: list[tuple[str, float, int]], *, byte_fallback: bool = False) -> bytes:
    """A Unigram model of ``<unk>`` and ``pieces`` (text, score, type) that leaves text as it is
    but for spaces (U+2581)."""
    proto = model_pb2.ModelProto()
    proto.trainer_spec.model_type = UNIGRAM
    proto.trainer_spec.byte_fallback = byte_fallback
    spec = proto.normalizer_spec
    spec.name, spec.add_dummy_prefix, spec.remove_extra_whitespaces = "identity", False, False
    proto.pieces.add(piece="<unk>", type=UNKNOWN)
    for text, score, kind in pieces:
        proto.pieces.add(piece=text, score=score, type=kind)
    if byte_fallback:
        for b in range(256):
            proto.pieces.add(piece=f"<0x{b:02X}>", type=BYTE)
    return proto.SerializeToString()


@pytest.mark.parametrize("symbol", ["a", "ab", "abcd", "\u00e9", "\u4e0d", "\U0001f600", "\u4e0d\u00e9"])
def test_user_defined_piece_scores_by_its_bytes(symbol: str) -> None:
    """The library scores a user-defined piece of n UTF-8 bytes 0.1 * (n - 1) in the lattice,
    whatever the model's scores: a NORMAL piece spanning it and one more character scored a hair
    below that path wins, a hair above loses."""
    text = symbol + "z"
    path = 0.1 * (len(symbol.encode("utf-8")) - 1) - 1.0  # the symbol, then "z" at -1
    chosen = []
    for margin in (-0.004, 0.004):
        data = _unigram([(c, -1.0, NORMAL) for c in sorted(set(text) - {symbol})]
                        + [(symbol, -50.0, USER_DEFINED), (text, path + margin, NORMAL)])
        ids = _sp(data).encode(text)
        assert _loaded(data).encode(text, add_special_tokens=False) == ids, (symbol, margin)
        chosen.append(ids)
    assert chosen[0] != chosen[1]  # the margin decides, so the score is the one above


def test_user_defined_sums_are_float32() -> None:
    """A user-defined piece's 0.1 is a float32 0.1 added in float32: after a piece of 2 it ties
    a piece of float32 2.1 ending with it (the earlier node stays), and beats the float32 below."""
    bits = struct.unpack("<I", struct.pack("<f", 2.1))[0]
    for score in (struct.unpack("<f", struct.pack("<I", b))[0] for b in (bits, bits - 1)):
        data = _unigram([("x", 2.0, NORMAL), ("a", -10.0, NORMAL), ("b", -10.0, NORMAL), ("xab", score, NORMAL),
                         ("ab", 0.0, USER_DEFINED)])
        assert _loaded(data).encode("xab", add_special_tokens=False) == _sp(data).encode("xab"), score


def test_unigram_without_normal_pieces() -> None:
    """No NORMAL piece: the library's minimum score stays FLT_MAX, so an unknown character
    outscores every piece and sums overflow to infinity (and NaN once the reset subtracts it)."""
    for pieces in ([("ab", 0.0, USER_DEFINED), ("a", 0.0, USER_DEFINED), ("b", 0.0, UNUSED)],
                   [("ab", 0.0, USER_DEFINED), ("x", -1.0, UNUSED)]):
        data = _unigram(pieces)
        for text in ("abxab", "xxabx", "bab", "b", "ab" * 20 + "x"):
            assert _loaded(data).encode(text, add_special_tokens=False) == _sp(data).encode(text), (pieces, text)


def _float32_steps(x: float, steps: int) -> float:
    """The float32 ``steps`` representable values from float32 ``x`` (away from 0 if positive)."""
    return struct.unpack("<f", struct.pack("<I", struct.unpack("<I", struct.pack("<f", x))[0] + steps))[0]


@pytest.mark.parametrize("score", [-3333.3, -12345.67, -777.77, 4321.9])
def test_near_ties_across_the_score_reset(score: float) -> None:
    """"a", "aa" and "aaa" scoring within a few float32 steps of one another per letter: which
    wins at a position turns on float32 rounding, which the library's reset of its sums every
    100,000 keeps at the precision of sums below that (sums from the text's start part from it
    within a few dozen letters)."""
    for steps in range(-3, 4):
        data = _unigram([("a", score, NORMAL), ("aa", _float32_steps(2 * score, steps), NORMAL),
                         ("aaa", _float32_steps(3 * score, -steps), NORMAL)])
        for n in (10, 37, 100, 301):
            assert _loaded(data).encode("a" * n, add_special_tokens=False) == _sp(data).encode("a" * n), (steps, n)


# one to four UTF-8 bytes, and "z" no piece is
_LETTERS = "ab\u00e9\u4e0d\U0001f600 "


def _random_unigram(rng: random.Random) -> bytes:
    """Pieces of one to four letters, NORMAL, USER_DEFINED (overlapping each other and the
    normal ones) or UNUSED, scores from 0.1 to 100,000 either side of 0: a path crosses the
    library's score reset (±100,000) every few pieces, where float32 has few fractional bits."""
    def score() -> float:
        return rng.choice((-1, -1, -1, 1)) * 10 ** rng.uniform(-1, 5)

    pieces: dict[str, tuple[float, int]] = {c: (score(), NORMAL) for c in _LETTERS.replace(" ", "\u2581")}
    for _ in range(rng.randrange(5, 60)):
        text = "".join(rng.choice(_LETTERS) for _ in range(rng.randrange(1, 5))).replace(" ", "\u2581")
        pieces.setdefault(text, (score(), rng.choice((NORMAL, NORMAL, USER_DEFINED, USER_DEFINED, UNUSED))))
    return _unigram([(text, s, kind) for text, (s, kind) in pieces.items()], byte_fallback=rng.random() < 0.3)


@pytest.mark.parametrize("seed", range(40 if full_tier() else 10))
def test_random_unigram_models_are_the_librarys(seed: int) -> None:
    rng = random.Random(seed)
    data = _random_unigram(rng)
    tok, sp = _loaded(data), _sp(data)
    for _ in range(40):
        text = "".join(rng.choice(_LETTERS + "z") for _ in range(rng.randrange(1, 1000)))
        assert tok.encode(text, add_special_tokens=False) == sp.encode(text), (seed, text)


# -- offsets: tok(..., return_offsets_mapping=True) and what is built on them -----------------

# Where the library's spans are not those of transformers' conversion of the same .model (which
# gives the dummy prefix's own "▁" piece the character after it, a collapsed run of spaces its
# last space, an unknown piece no dropped input after it, and every byte piece its character):
# those pieces, ends and runs of spaces, characters the charsmap writes as several (ﬁ, ㌔),
# characters it deletes, unknown characters, byte pieces of one character.
_OFFSET_TEXTS = (
    "  lead  and   trail  ", "\u0644\u064e\u0642\u064e\u062f \u0643\u064e\u0627\u0646 ", "ﬁ ﬂ ① ㌔ ｶﾞ",
    "x\u200by \u200b", "\U0001f600\U0001f601 \U0001f600", "a\n\n  b\t\tc\r\n", "\u65e5\u672c \ud55c\uad6d\uc5b4",
    "\u2581 \u2581\u2581x", "\u3000\u3000full\u3000width\u3000", "\x00\x7f",
)


@pytest.mark.parametrize("name", MODELS)
def test_offsets_are_the_librarys(name: str, tmp_path: Path) -> None:
    """Every piece's span is the library's ``begin`` / ``end`` (in characters), read from the
    .model and from its .mtok (and, for mistral, whose type-0 file is exact, its .txt)."""
    sp = oracle(name)
    readers = [loaded(name), pymtok.load(export_report(model_path(name), tmp_path / "mtok")[0])]
    if name == "mistral-7b-v0.1.model":
        readers.append(pymtok.load(export_report(model_path(name), tmp_path / "txt", format="txt")[0]))
    for tok in readers:
        assert offset_mismatches(tok, sp, _EDIT_TEXTS + _OFFSET_TEXTS) == []


@pytest.mark.parametrize("name", MODELS)
def test_call_fields_beside_the_offsets(name: str) -> None:
    """With BOS and EOS around the text: transformers' layout around the library's pieces (its
    proto API gives no spans for BOS and EOS; transformers' are (0, 0) and masked), one word
    (no pre-tokenizer: transformers' conversion of the .model gives one too, its Metaspace not
    splitting), and char_to_token the piece whose span holds the character; a batch and a pair
    the same, row by row and sequence by sequence."""
    tok, sp = read_model(model_path(name), add_bos=True, add_eos=True), oracle(name)
    texts = ["  Hello   world ", "ﬁne\tＡＢＣ \U0001f600\u0644\u064e", "x"]
    keywords: dict[str, Any] = {"return_offsets_mapping": True, "return_special_tokens_mask": True}
    batch = tok(texts, **keywords)
    for row, text in enumerate(texts):
        pieces = sentencepiece_offsets(sp, text)
        single = tok(text, **keywords)
        assert single["input_ids"] == batch["input_ids"][row] == [sp.bos_id(), *(p[0] for p in pieces), sp.eos_id()]
        assert single["offset_mapping"] == batch["offset_mapping"][row] == [(0, 0), *((s, e) for _, s, e in pieces), (0, 0)]
        assert single["special_tokens_mask"] == [1, *[0] * len(pieces), 1]
        assert single.word_ids() == [None, *[0] * len(pieces), None]
        for char in range(len(text)):
            holder = next((i + 1 for i, (_, s, e) in enumerate(pieces) if s <= char < e), None)
            assert single.char_to_token(char) == batch.char_to_token(row, char) == holder, (text, char)
    first, second = texts[0], texts[1]
    pair = tok(first, second, **keywords)
    offsets = [(s, e) for _, s, e in sentencepiece_offsets(sp, first) + sentencepiece_offsets(sp, second)]
    assert [o for o, mask in zip(pair["offset_mapping"], pair["special_tokens_mask"]) if not mask] == offsets


def _charsmap_of(rules: dict[bytes, bytes]) -> bytes:
    """A precompiled charsmap replacing each key of ``rules`` (any bytes) by its value: a
    darts-clone double array that passes the library's validation, one 256-unit block per trie
    node (a node's children at its block plus their byte, its leaf, the offset of its
    replacement, at the block's start), then the NUL-terminated replacements. Unlike a
    trainer's, its empty units match a NUL byte: the start of a block without a leaf passes it
    on to the block itself."""
    replacements = b""
    value_of: dict[bytes, int] = {}
    for key, value in rules.items():
        value_of[key] = len(replacements)
        replacements += value + b"\0"
    nodes = sorted({key[:i] for key in rules for i in range(len(key) + 1)})
    block = {node: 256 * (k + 1) for k, node in enumerate(nodes)}
    units = [0] * (256 * (len(nodes) + 1))
    units[0] = block[b""] << 10
    for node in nodes:
        if node:
            at = block[node[:-1]] ^ node[-1]
            units[at] = (at ^ block[node]) << 10 | (0x100 if node in rules else 0) | node[-1]
        if node in rules:
            units[block[node]] = 1 << 31 | value_of[node]
    trie = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(trie)) + trie + replacements


def test_offsets_inside_a_character_are_refused() -> None:
    """A charsmap key that ends inside a character (no trainer writes one; a .model may hold it):
    the library's offsets then fall inside the character, which no character offset can say, so
    asking for offsets raises rather than rounding them."""
    proto = proto_of("test_model.model")
    proto.normalizer_spec.precompiled_charsmap = _charsmap_of({b"\xc3": b"x"})  # é's first byte
    data = proto.SerializeToString()
    tok, sp = _loaded(data), _sp(data)
    with pytest.raises(KeyError):
        sentencepiece_offsets(sp, "a\u00e9")
    assert call_offsets(tok, "ab") == sentencepiece_offsets(sp, "ab")
    with pytest.raises(FormatError, match="charsmap key ends inside a character"):
        tok("a\u00e9", return_offsets_mapping=True)


# keys that end inside a character (é's and ö's first byte, 一's and 不's first two, an emoji's
# first two, deleted), one across a character into the next, one that starts at a continuation
# byte (é's second): the library goes on inside the character, each byte no key starts at U+FFFD
_INSIDE_RULES = {b"\xc3": b"x", b"\xa9": b"z", b"\xe4\xb8": b"y", b"o\xc3": b"Q", b"\xf0\x9f": b""}
_INSIDE_TEXTS = (
    "a\u00e9b", "\u00e9", "\u00e9\u00e9", "o\u00e9 o\u00f6 \u00f6", "Stra\u00dfe na\u00efve", "\u4e00\u4e0d\u4e0e \u4e0d\u662f",
    "\U0001f600\U0001f601 x\U0001f600", "\u00e9\u4e00\U0001f600o", "\x00\u00e9 \x00\x00o\x00\u00e9 \x00",
)


@functools.lru_cache(maxsize=None)
def _inside(base: str) -> bytes:
    proto = proto_of(base)
    proto.normalizer_spec.precompiled_charsmap = _charsmap_of(_INSIDE_RULES)
    return proto.SerializeToString()


@pytest.mark.parametrize("base", MODELS)
def test_charsmap_key_inside_a_character_gives_the_librarys_ids(base: str, tmp_path: Path) -> None:
    """No trainer writes such a key but a .model may hold one: the ids are the library's, read
    from the .model and from its .mtok, and on a text long enough to be normalized in parts."""
    data = _inside(base)
    path = tmp_path / "inside.model"
    path.write_bytes(data)
    sp = _sp(data)
    texts = _INSIDE_TEXTS + _EDIT_TEXTS + chunks(DEFAULT_CHUNKS)
    for tok in (pymtok.load(path), pymtok.load(export_report(path, tmp_path / "out")[0])):
        assert mismatches(tok, sp, texts) == []
    long = "".join(_INSIDE_TEXTS) * (PART // 40)
    assert _loaded(data).encode(long, add_special_tokens=False) == sp.encode(long)


@pytest.mark.parametrize("base", MODELS)
@settings(max_examples=examples(100), deadline=None)
@given(text=_texts())
def test_charsmap_key_inside_a_character_hypothesis(base: str, text: str) -> None:
    data = _inside(base)
    assert _loaded(data).encode(text, add_special_tokens=False) == _sp(data).encode(text), text


def test_byte_fallback_reserved_characters(tmp_path: Path) -> None:
    """Mistral (byte fallback) with characters that are CONTROL or UNUSED pieces: the unknown
    id's byte pieces, from the .model, its .mtok and its type-0 .txt (exact for mistral)."""
    proto = proto_of("mistral-7b-v0.1.model")
    for step in EDITS["control_chars"] + EDITS["unused_chars"]:
        step(proto)
    data = proto.SerializeToString()
    path = tmp_path / "m.model"
    path.write_bytes(data)
    sp = _sp(data)
    assert sp.encode("1x2q3", out_type=str) == [f"<0x{b:02X}>" for b in "\u2581".encode()] + [
        "1", "<0x78>", "2", "<0x71>", "3"]
    readers = [pymtok.load(path), pymtok.load(export_report(path, tmp_path / "mtok")[0]),
               pymtok.load(export_report(path, tmp_path / "txt", format="txt")[0])]
    for tok in readers:
        check_model(tok, sp, _EDIT_TEXTS + chunks(DEFAULT_CHUNKS)[:100])


@pytest.mark.parametrize("length", [101, 102, 103])
@pytest.mark.parametrize("kind", [1, 3, 5])
def test_unused_merges_deeper_than_the_librarys_limit(length: int, kind: int) -> None:
    """A chain of UNUSED pieces each one character longer (the first character NORMAL, CONTROL
    or UNUSED): the library splits it back 100 levels deep, then takes each symbol as it is,
    a control or UNUSED piece's own id included."""
    proto = proto_of("botchan_en_bpe_1000.model")
    chars = [chr(0x4E00 + i) for i in range(length)]
    proto.pieces.add(piece=chars[0], score=-5.0, type=kind)
    for k in range(2, length + 1):
        proto.pieces.add(piece="".join(chars[:k]), score=-5.0, type=5)
    data = proto.SerializeToString()
    for text in ("".join(chars), "a" + "".join(chars) + "b " + "".join(chars[:50])):
        assert _loaded(data).encode(text, add_special_tokens=False) == _sp(data).encode(text)


def test_bpe_piece_spelled_twice_is_refused() -> None:
    """The library keeps a BPE model's pieces in one map and refuses a second of any type;
    Unigram keeps reserved pieces apart, and text yields the other."""
    for base in ("botchan_en_bpe_1000.model", "test_model.model"):
        proto = proto_of(base)
        proto.pieces.add(piece="\u2581a", score=0.0, type=3)
        data = proto.SerializeToString()
        if KINDS[base] == "SentencePieceBPE":
            with pytest.raises(RuntimeError, match="already defined"):
                spm.SentencePieceProcessor(model_proto=data)
            with pytest.raises(FormatError, match="already defined"):
                _loaded(data)
        else:
            assert _loaded(data).encode("a b", add_special_tokens=False) == _sp(data).encode("a b")


# -- the wire-format reader ------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not out[-1] & 0x80:
            return bytes(out)


def test_reader_matches_protobuf() -> None:
    for name in MODELS:
        ours, theirs = parse_model(model_path(name).read_bytes()), proto_of(name)
        assert [(p.piece, p.score, p.type) for p in ours.pieces] == [(p.piece, p.score, p.type) for p in theirs.pieces]
        for field in ("model_type", "unk_id", "bos_id", "eos_id", "pad_id", "byte_fallback", "treat_whitespace_as_suffix",
                      "unk_piece", "bos_piece", "eos_piece", "unk_surface"):
            assert getattr(ours.trainer_spec, field) == getattr(theirs.trainer_spec, field), field
        for field in ("name", "precompiled_charsmap", "add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces"):
            assert getattr(ours.normalizer_spec, field) == getattr(theirs.normalizer_spec, field), field


def _top_level_boundaries(data: bytes) -> list[int]:
    """The offset after each top-level field and after each field inside the first pieces."""
    out, pos = [], 0
    while pos < len(data):
        tag_end = pos
        while data[tag_end] & 0x80:
            tag_end += 1
        pos = tag_end + 1
        length, shift = 0, 0
        while True:
            byte = data[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        out += [tag_end + 1, pos, pos + length // 2]
        pos += length
        out.append(pos)
    return out


@pytest.mark.parametrize("name", ["test_model.model", "botchan_en_bpe_1000.model"])
def test_truncations(name: str) -> None:
    """A truncated file is a FormatError, or (cut between fields) a smaller valid model read as
    sentencepiece reads it."""
    data = model_path(name).read_bytes()
    rng = random.Random(1)
    cuts = sorted(set(_top_level_boundaries(data)[:400] + _top_level_boundaries(data)[-40:]
                      + [rng.randrange(len(data)) for _ in range(200)] + list(range(0, 40))))
    for cut in cuts:
        piece = data[:cut]
        try:
            config = parse_model(piece)
            tok = _config_or_error(piece)
        except FormatError:
            continue
        assert config is not None
        if tok is None:
            continue
        try:
            sp = spm.SentencePieceProcessor(model_proto=piece)
        except (RuntimeError, OSError):
            continue  # sentencepiece refuses what pymtok accepts: only a smaller model, checked above
        for text in ("Hello  world", " a-b ", "ﬁ ①"):
            assert tok.encode(text, add_special_tokens=False) == sp.encode(text), (cut, text)


def _config_or_error(data: bytes) -> pymtok.Tokenizer | None:
    from pymtok.sentencepiece import tokenizer_config

    try:
        return pymtok.Tokenizer.from_config(tokenizer_config(parse_model(data)))
    except FormatError:
        return None


@pytest.mark.parametrize("name", MODELS)
def test_bit_flips_never_crash(name: str) -> None:
    data = bytearray(model_path(name).read_bytes())
    rng = random.Random(name)
    # flips in the pieces, the specs and the charsmap alike; every tenth file is also built
    # and run. Reading Mistral's 32k pieces is what costs: fewer rounds there, same structure;
    # the fast tier a quarter of the rounds.
    rounds = (40 if len(data) > 300_000 else 300) // (1 if full_tier() else 4)
    for round in range(rounds):
        flipped = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(flipped)) if rng.random() < 0.5 else rng.randrange(min(len(flipped), 4000))
            flipped[at] ^= 1 << rng.randrange(8)
        try:
            config = _config(bytes(flipped))
            if round % 10:
                continue
            tok = pymtok.Tokenizer.from_config(config)
            for text in ("Hello  world", "ﬁ ① 한국어 \U0001f600", ""):
                tok.decode(tok.encode(text))
        except FormatError:
            pass


def _config(data: bytes) -> dict[str, Any]:
    from pymtok.sentencepiece import tokenizer_config

    return tokenizer_config(parse_model(data))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x0a" + _varint(1 << 40), "runs past the end"),
        (b"\x0a\x05\x0a\x03ab", "runs past the end"),
        (b"\x0a" + b"\xff" * 11, "longer than 64 bits"),
        (b"\x0a\x80", "runs past the end"),
        (b"\x00\x00", "not a protobuf field number"),
        (b"\x0b", "wire type 3"),
        (b"\x0a\x02\x15\x00", "4-byte float"),
        (b"\x0a\x03\x0a\x01\xff", "not UTF-8"),
        (b"\x0a\x02\x18\x09", "not a SentencePiece type"),
        (b"\x0a\x02\x10\x01", "wire type varint, expected 32-bit"),
        (b"\x12\x02\x18\x80", "TrainerSpec.model_type: varint runs past the end of its message"),
        (b"\x1a" + _varint(1 << 62), "runs past the end"),
    ],
)
def test_corrupt_bytes_name_field_and_offset(data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message) as info:
        parse_model(data, "bad.model")
    assert "bad.model: byte " in str(info.value)


def test_models_sentencepiece_refuses_are_refused(tmp_path: Path) -> None:
    proto = proto_of("botchan_en_bpe_1000.model")
    proto.pieces[0].type = 1  # no UNKNOWN piece left
    with pytest.raises(FormatError, match="UNKNOWN"):
        _config(proto.SerializeToString())
    proto = proto_of("botchan_en_bpe_1000.model")
    proto.pieces.add(piece=proto.pieces[10].piece, score=0.0, type=1)
    with pytest.raises(FormatError, match="already defined"):
        _config(proto.SerializeToString())
    proto = proto_of("mistral-7b-v0.1.model")
    proto.pieces[3].type = 1
    with pytest.raises(FormatError, match="256 byte pieces"):
        _config(proto.SerializeToString())
    proto = proto_of("botchan_en_bpe_1000.model")
    proto.trainer_spec.model_type = 3
    with pytest.raises(FormatError, match="WORD"):
        _config(proto.SerializeToString())
    path = tmp_path / "x.model"
    path.write_bytes(b"\x0a\x05\x0a\x03ab")
    with pytest.raises(FormatError, match="x.model"):
        pymtok.load(path)



def _set_score(index: int, score: float) -> Callable[[Any], None]:
    def edit(proto: Any) -> None:
        proto.pieces[index].score = score

    return edit


def _add_piece(text: str, kind: int = NORMAL) -> Callable[[Any], None]:
    return lambda proto: proto.pieces.add(piece=text, score=-1.0, type=kind)


def _only_reserved(proto: Any) -> None:
    del proto.pieces[3:]


def _charsmap_defect(spec: str, defect: Callable[[list[int], bytes], tuple[list[int], bytes]]) -> Callable[[Any], None]:
    """``spec``'s charsmap a small valid one (a -> b, cd -> xyz) with ``defect`` applied to its
    trie units and replacements."""
    def edit(proto: Any) -> None:
        good = _charsmap_of({b"a": b"b", b"cd": b"xyz"})
        (size,) = struct.unpack_from("<I", good)
        units, replacements = defect(list(struct.unpack_from(f"<{size // 4}I", good, 4)), good[4 + size :])
        trie = struct.pack(f"<{len(units)}I", *units)
        target = getattr(proto, spec)
        target.precompiled_charsmap = struct.pack("<I", len(trie)) + trie + replacements
        if spec == "denormalizer_spec":
            target.add_dummy_prefix = target.remove_extra_whitespaces = target.escape_whitespaces = False

    return edit


def _values(units: list[int], value: int) -> list[int]:
    return [1 << 31 | value if unit >> 31 else unit for unit in units]


def _garbage_block(unit: int) -> Callable[[list[int], bytes], tuple[list[int], bytes]]:
    """A block no key reaches, holding ``unit``: the library checks every unit."""
    return lambda units, rest: ([*units, *[0] * 255, unit], rest)


_CHARSMAP_DEFECTS: dict[str, tuple[Callable[[list[int], bytes], tuple[list[int], bytes]], str]] = {
    "a trie of part of a block": (lambda units, rest: (units[:-1], rest), "1024-byte blocks"),
    "no trie": (lambda units, rest: ([], rest), "1024-byte blocks"),
    "replacements without NUL": (lambda units, rest: (units, rest[:-1]), "NUL"),
    "no replacements": (lambda units, rest: (units, b""), "no replacements"),
    "a value past the replacements": (lambda units, rest: (_values(units, len(rest)), rest), "past the replacements"),
    "the root a leaf": (lambda units, rest: ([units[0] | 0x100, *units[1:]], rest), "root"),
    "the root without children": (lambda units, rest: ([0, *units[1:]], rest), "root"),
    "children past the trie": (_garbage_block(5000 << 10 | ord("q")), "children outside"),
    "a value past, unreached": (_garbage_block(1 << 31 | 99), "past the replacements"),
    "a leaf flag on no value": (_garbage_block(1 << 10 | 0x100 | ord("q")), "no value"),
}

# what sentencepiece 0.2.3 refuses to load, as (fixture, edit, what pymtok's error says)
_REFUSED: dict[str, tuple[str, Callable[[Any], None], str]] = {
    "unigram NaN score": ("test_model.model", _set_score(10, math.nan), "NaN"),
    "unigram infinite score": ("test_model.model", _set_score(10, -math.inf), "infinite"),
    "unigram NaN score on a control piece": ("test_model.model", _set_score(1, math.nan), "NaN"),
    "unigram without a piece for its trie": ("test_model.model", _only_reserved, "no NORMAL"),
    "unigram piece with NUL": ("test_model.model", _add_piece("x\0y"), "NUL"),
    "bpe piece with NUL": ("botchan_en_bpe_1000.model", _add_piece("\0"), "NUL"),
    "byte fallback piece with NUL after it": ("mistral-7b-v0.1.model", _add_piece("\0\0"), "NUL"),
    "unigram piece of 8000 bytes": ("test_model.model", _add_piece("x" * 8000), "too long"),
    "bpe control piece of 8000 bytes": ("botchan_en_bpe_1000.model", _add_piece("\u00e9" * 4000, CONTROL), "too long"),
    **{f"normalizer: {name}": ("test_model.model", _charsmap_defect("normalizer_spec", defect), reason)
       for name, (defect, reason) in _CHARSMAP_DEFECTS.items()},
    **{f"bpe denormalizer: {name}": ("botchan_en_bpe_1000.model", _charsmap_defect("denormalizer_spec", defect), reason)
       for name, (defect, reason) in list(_CHARSMAP_DEFECTS.items())[::3]},
}


def test_bpe_with_a_nan_score_is_refused() -> None:
    """The library loads it, but a NaN is neither above nor below a score, so where it merges
    depends on how its heap holds the pairs: no pymtok path gives that order, so it is refused."""
    proto = proto_of("botchan_en_bpe_1000.model")
    proto.pieces[10].score = math.nan
    spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
    with pytest.raises(FormatError, match="NaN"):
        _config(proto.SerializeToString())


@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_what_the_library_refuses_is_refused(case: str) -> None:
    base, edit, reason = _REFUSED[case]
    proto = proto_of(base)
    edit(proto)
    data = proto.SerializeToString()
    with pytest.raises(RuntimeError):
        spm.SentencePieceProcessor(model_proto=data)
    with pytest.raises(FormatError, match=reason):
        _config(data)


# 7,999 UTF-8 bytes, one byte short of too long; no repeats, so that no piece search from
# inside it runs long (pymtok looks each prefix up whole)
_LONG_PIECE = "".join(random.Random(3).sample([chr(c) for c in range(0x4E00, 0x9FA0)], 2666)) + "x"

# the nearest models the library loads
_LOADED: dict[str, tuple[str, Callable[[Any], None]]] = {
    "bpe infinite score": ("botchan_en_bpe_1000.model", _set_score(10, math.inf)),
    "unigram piece of 7999 bytes": ("test_model.model", _add_piece(_LONG_PIECE)),
    "bpe piece of 7999 bytes": ("botchan_en_bpe_1000.model", _add_piece(_LONG_PIECE, USER_DEFINED)),
    "unigram only UNUSED pieces for its trie": ("test_model.model", lambda p: [setattr(x, "type", UNUSED) for x in p.pieces[3:]]),
    # with byte fallback the NUL piece is an UNUSED piece in no map: the text's NUL is <0x00>
    "NUL piece with byte fallback": ("mistral-7b-v0.1.model", _add_piece("\0")),
    "NUL pieces with byte fallback": ("mistral-7b-v0.1.model", lambda p: [_add_piece("\0", k)(p) for k in (1, 2, 4)]),
    "a charsmap value at its last NUL": ("test_model.model", _charsmap_defect("normalizer_spec", lambda units, rest: (
        _values(units, len(rest) - 1), rest))),
}


@pytest.mark.parametrize("case", sorted(_LOADED))
def test_what_the_library_loads_is_loaded(case: str) -> None:
    base, edit = _LOADED[case]
    proto = proto_of(base)
    edit(proto)
    data = proto.SerializeToString()
    tok, sp = _loaded(data), _sp(data)
    texts = ("a\0b \0\0x", f"a{_LONG_PIECE} {_LONG_PIECE[:-1]}", "cd a", *_EDIT_TEXTS, *chunks(DEFAULT_CHUNKS)[:30])
    assert mismatches(tok, sp, texts) == []
    n = sp.get_piece_size()
    for ids in ([n - 1, 3, n - 1], [n - 3, n - 2], list(range(10, 40))):
        assert tok.decode(ids) == sp.decode(ids), ids

def test_folder_files_beside_the_model(tmp_path: Path) -> None:
    """tokenizer_config.json, special_tokens_map.json and generation_config.json beside tokenizer.model."""
    shutil.copy(model_path("mistral-7b-v0.1.model"), tmp_path / "tokenizer.model")
    bare = pymtok.load(tmp_path)
    assert bare.encode("Hi") == oracle("mistral-7b-v0.1.model").encode("Hi")  # no config: neither BOS nor EOS
    assert (bare.special_ids, bare.stop_ids, bare.prefix_ids) == ([0, 1, 2], [2], [])
    (tmp_path / "tokenizer_config.json").write_text(
        '{"add_bos_token": true, "add_eos_token": false, "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"}'
    )
    (tmp_path / "special_tokens_map.json").write_text('{"pad_token": "<unk>", "bos_token": "<s>"}')
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": [2, 13]}')
    tok = pymtok.load(tmp_path)
    assert tok.encode("Hi") == oracle("mistral-7b-v0.1.model").encode("Hi", add_bos=True)
    assert (tok.prefix_ids, tok.stop_ids) == ([1], [2, 13])
    assert tok.meta.special_tokens["pad_token"] == "<unk>" and tok.meta.special_tokens["eos_token"] == "</s>"
    assert tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False) == "<s>Hi"


_FOLDER_TEXTS = ("Hello world", " two  spaces ", "<pad> x <s> y </s>", "héllo 你好 <unk> [MASK]", "\n\ttab", "<x1>a<s>")


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("config,special_tokens_map", [
    (None, None),
    ({"add_bos_token": True, "pad_token": "<pad>"}, None),
    ({"tokenizer_class": "PreTrainedTokenizerFast", "additional_special_tokens": ["<x1>"]},
     {"pad_token": "<unk>", "mask_token": "[MASK]"}),
])
def test_folder_call_and_decode_as_transformers(name: str, config: Any, special_tokens_map: Any, tmp_path: Path) -> None:
    """A folder holding tokenizer.model and no tokenizer.json: transformers (no tokenizer class
    named) converts the model, its control and unknown pieces special added tokens and its
    decoder HF's; __call__, decode, len and the vocabulary follow it, a .mtok too."""
    import json
    import warnings

    from transformers import AutoTokenizer

    shutil.copy(model_path(name), tmp_path / "tokenizer.model")
    for file, value in (("tokenizer_config.json", config), ("special_tokens_map.json", special_tokens_map)):
        if value is not None:
            (tmp_path / file).write_text(json.dumps(value), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = AutoTokenizer.from_pretrained(str(tmp_path))
    folder = pymtok.load(tmp_path)
    texts = [*_FOLDER_TEXTS, *chunks(20)]
    for tok in (folder, pymtok.load(folder.save(tmp_path / "saved.mtok"))):
        assert (len(tok), tok.get_vocab()) == (len(theirs), theirs.get_vocab())
        assert (tok.all_special_tokens, tok.all_special_ids) == (theirs.all_special_tokens, theirs.all_special_ids)
        assert dict(tok(texts)) == dict(theirs(texts))
        ids = [*range(min(len(theirs), 400)), len(theirs) - 1, 0, 5, 1, 2]
        for skip in (False, True):
            assert tok.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)
        assert tok.encode(texts[0]) == oracle(name).encode(texts[0], add_bos=bool(config and config.get("add_bos_token")))


@pytest.mark.parametrize("config", [{"tokenizer_class": "LlamaTokenizer"}, {"tokenizer_class": "T5Tokenizer"},
                                    {"legacy": False}])
def test_folder_with_a_tokenizer_class_refuses_transformers_calls(config: dict[str, Any], tmp_path: Path) -> None:
    """A named class builds its own pipeline from the pieces (LlamaTokenizer splits " two" other
    than sentencepiece does), as does legacy=False: transformers' side of the API says it is not
    modelled, sentencepiece's side still runs."""
    import json

    shutil.copy(model_path("mistral-7b-v0.1.model"), tmp_path / "tokenizer.model")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    tok = pymtok.load(tmp_path)
    for call in (lambda: tok("a"), lambda: tok.decode([1]), lambda: len(tok)):
        with pytest.raises(FormatError, match="does not model"):
            call()
    assert tok.encode(" two  spaces") == oracle("mistral-7b-v0.1.model").encode(" two  spaces")
    assert tok.decode([1, 22557], clean_up_tokenization_spaces=False) == oracle("mistral-7b-v0.1.model").decode([1, 22557])
