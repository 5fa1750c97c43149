"""Decoders against HF ``tokenizers`` and ``clean_up_tokenization`` against ``transformers``."""

from __future__ import annotations

import json

import pytest
from conftest import TOKENIZER_NAMES, corpus_chunks, examples, fixture_path, hf_tokenizer, ours
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pymtok import decoders
from pymtok.byte_level import CHAR_TO_BYTE, bytes_to_chars
from pymtok.errors import FormatError

SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def hf_decoder(cfg: dict):
    """HF's decoder loaded from the very JSON config ours is built from."""
    from tokenizers import Tokenizer

    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": cfg,
        "model": {"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"},
    }
    return Tokenizer.from_str(json.dumps(doc)).decoder


def assert_same(cfg: dict, tokens: list[str]) -> None:
    ours = decoders.from_config(cfg)
    assert ours is not None
    assert "".join(ours(tokens)) == hf_decoder(cfg).decode(tokens), (cfg, tokens)


# ---------------------------------------------------------------------------------------------
# token strategies

byte_tokens = st.one_of(
    st.integers(0, 255).map(lambda b: f"<0x{b:02X}>"),
    st.integers(0, 255).map(lambda b: f"<0x{b:02x}>"),
    # near misses: sign, too short/long, non-ASCII digit, wrong case of the x
    st.sampled_from(["<0x+A>", "<0x-A>", "<0x+>>", "<0xé>", "<0x4>", "<0x411>", "<0xZZ>",
                     "<0X41>", "<0x 1>", "<0x>", "<0x٣٣>"]),
)
# byte runs that are often invalid or cut UTF-8: lead bytes, continuation bytes, surrogates
utf8ish_bytes = st.lists(
    st.one_of(st.sampled_from([0xE3, 0x81, 0x82, 0xF0, 0x9F, 0x98, 0x80, 0xED, 0xA0, 0xC0, 0xFF,
                               0xC3, 0xA9, 0x41]), st.integers(0, 255)),
    max_size=8,
).map(bytes)
gpt2_tokens = st.one_of(
    utf8ish_bytes.map(bytes_to_chars),
    st.binary(max_size=6).map(bytes_to_chars),
    st.text(st.sampled_from(sorted(CHAR_TO_BYTE)), max_size=5),
)
text_tokens = st.one_of(
    st.text(max_size=6),
    st.text(st.sampled_from("▁ _x\ufffdab.,?!'nmtsvred#<>|/w"), max_size=6),
    st.sampled_from(["##", "##a", " .", " n't", "do not", " do not", " 's", " ' ", "'m", "</w>",
                     "a</w>", "<pad>", "|", "\ufffd", "▁▁", "", "  "]),
)
any_tokens = st.lists(st.one_of(byte_tokens, gpt2_tokens, text_tokens), max_size=25)


# ---------------------------------------------------------------------------------------------
# every fixture's own decoder on its own tokens


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_fixture_decoder_matches_hf(name: str) -> None:
    path = fixture_path("tokenizers", name, "tokenizer.json")
    cfg = json.loads(path.read_text("utf-8"))["decoder"]
    ours = decoders.from_config(cfg)
    assert ours is not None, f"{name}: decoder is null"
    hf = hf_tokenizer(name)
    for enc in hf.encode_batch(corpus_chunks(300, seed=7)):
        tokens = enc.tokens
        # the whole list, and a window whose edges cut multi-byte characters and words
        for window in (tokens, tokens[1:-1], tokens[len(tokens) // 3 : len(tokens) // 3 + 3]):
            assert "".join(ours(window)) == hf.decoder.decode(window), (name, window)


# ---------------------------------------------------------------------------------------------
# component by component, on hypothesis token lists


@SETTINGS
@given(any_tokens)
def test_byte_level(tokens: list[str]) -> None:
    assert_same({"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True}, tokens)


@SETTINGS
@given(st.lists(st.one_of(byte_tokens, text_tokens), max_size=25))
def test_byte_fallback(tokens: list[str]) -> None:
    assert_same({"type": "ByteFallback"}, tokens)


@SETTINGS
@given(st.lists(utf8ish_bytes, max_size=6), st.lists(text_tokens, max_size=3))
def test_byte_fallback_runs(runs: list[bytes], others: list[str]) -> None:
    tokens: list[str] = []
    for i, run in enumerate(runs):
        tokens += [f"<0x{b:02X}>" for b in run]
        if i < len(others):
            tokens.append(others[i])
    assert_same({"type": "ByteFallback"}, tokens)


metaspace_configs = st.builds(
    lambda replacement, scheme, split: {
        "type": "Metaspace", "replacement": replacement, "prepend_scheme": scheme, "split": split,
    },
    st.sampled_from(["▁", "_", "x"]),
    st.sampled_from(["always", "first", "never"]),
    st.booleans(),
)


@SETTINGS
@given(metaspace_configs, any_tokens)
def test_metaspace(cfg: dict, tokens: list[str]) -> None:
    assert_same(cfg, tokens)


@pytest.mark.parametrize(
    "legacy",
    [{"add_prefix_space": True}, {"add_prefix_space": True, "str_rep": "▁"},
     {"add_prefix_space": False, "prepend_scheme": "never"}, {"prepend_scheme": "first"}],
)
def test_metaspace_legacy_fields(legacy: dict) -> None:
    cfg = {"type": "Metaspace", "replacement": "▁", **legacy}
    assert_same(cfg, ["▁a▁", "▁b", "c▁"])


@SETTINGS
@given(st.sampled_from(["##", "", "@@"]), st.booleans(), any_tokens)
def test_wordpiece(prefix: str, cleanup: bool, tokens: list[str]) -> None:
    assert_same({"type": "WordPiece", "prefix": prefix, "cleanup": cleanup}, tokens)


@SETTINGS
@given(any_tokens)
def test_fuse(tokens: list[str]) -> None:
    assert_same({"type": "Fuse"}, tokens)


@SETTINGS
@given(st.sampled_from(["▁", "", "a", "ab", "##", "\ufffd"]),
       st.sampled_from([" ", "", "▁▁"]),
       any_tokens)
def test_replace_string(pattern: str, content: str, tokens: list[str]) -> None:
    assert_same({"type": "Replace", "pattern": {"String": pattern}, "content": content}, tokens)


# patterns spelled the same in Oniguruma and the regex module, many of them matching empty
REGEXES = ["x*", "a|", "", r"\s+", "(?<=a)", "b?", "▁+", r"[ab]*?", r"(?=\d)", r"\p{L}+", "a{2}"]


@SETTINGS
@given(st.sampled_from(REGEXES), st.sampled_from(["-", "", "<>"]),
       st.lists(st.text(st.sampled_from("abx1 ▁é"), max_size=8), max_size=6))
def test_replace_regex(pattern: str, content: str, tokens: list[str]) -> None:
    assert_same({"type": "Replace", "pattern": {"Regex": pattern}, "content": content}, tokens)


def hf_strip_panics(token: str, content: str, start: int, stop: int) -> bool:
    """Tokens on which HF's Strip indexes out of bounds (cuts that meet or underflow)."""
    leading = len(token) - len(token.lstrip(content))
    trailing = len(token) - len(token.rstrip(content))
    if trailing == len(token) and stop > len(token):
        return True
    return min(leading, start) > len(token) - min(trailing, stop)


@SETTINGS
@given(st.sampled_from([" ", "▁", "a"]), st.integers(0, 3), st.integers(0, 3), any_tokens)
def test_strip(content: str, start: int, stop: int, tokens: list[str]) -> None:
    assume(not any(hf_strip_panics(t, content, start, stop) for t in tokens))
    assert_same({"type": "Strip", "content": content, "start": start, "stop": stop}, tokens)


def test_strip_where_hf_panics_keeps_what_is_left() -> None:
    strip = decoders.Strip(content=" ", start=1, stop=2)
    assert strip([" ", "", "   ", "  a "]) == ["", "", "", " a"]


@SETTINGS
@given(st.sampled_from(["</w>", "", "@"]), any_tokens)
def test_bpe_decoder(suffix: str, tokens: list[str]) -> None:
    assert_same({"type": "BPEDecoder", "suffix": suffix}, tokens)


ctc_tokens = st.sampled_from(["<pad>", "|", "a", "b", " .", "do not", "▁", "x<pad>y"])


@SETTINGS
@given(st.sampled_from(["<pad>", "a"]), st.sampled_from(["|", "▁"]), st.booleans(),
       st.lists(ctc_tokens | text_tokens, max_size=25))
def test_ctc(pad: str, delimiter: str, cleanup: bool, tokens: list[str]) -> None:
    cfg = {"type": "CTC", "pad_token": pad, "word_delimiter_token": delimiter, "cleanup": cleanup}
    assert_same(cfg, tokens)


# chains: every decoder after every other, so list-shaped outputs (not only the join) must agree
chain_members = st.one_of(
    st.just({"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True}),
    st.just({"type": "ByteFallback"}),
    st.just({"type": "Fuse"}),
    metaspace_configs,
    st.builds(lambda p, c: {"type": "WordPiece", "prefix": p, "cleanup": c},
              st.sampled_from(["##", ""]), st.booleans()),
    st.builds(lambda p, c: {"type": "Replace", "pattern": p, "content": c},
              st.sampled_from([{"String": "▁"}, {"String": "a"},
                               {"Regex": "x*"}, {"Regex": r"\s"}]),
              st.sampled_from([" ", "", "▁"])),
    # stop=0: HF's Strip can only panic when it also strips at the end
    st.builds(lambda c, s: {"type": "Strip", "content": c, "start": s, "stop": 0},
              st.sampled_from([" ", "▁"]), st.integers(0, 2)),
    st.builds(lambda s: {"type": "BPEDecoder", "suffix": s}, st.sampled_from(["</w>", "a"])),
    st.builds(lambda c: {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|",
                         "cleanup": c}, st.booleans()),
)


@SETTINGS
@given(st.lists(chain_members, max_size=4), any_tokens)
def test_sequence(members: list[dict], tokens: list[str]) -> None:
    assert_same({"type": "Sequence", "decoders": members}, tokens)


def test_nested_sequence_and_empty() -> None:
    cfg = {"type": "Sequence", "decoders": [
        {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]}, {"type": "Fuse"}]}
    for tokens in ([], ["<0x41>", "b"], ["<0xE3>"]):
        assert_same(cfg, tokens)
    assert_same({"type": "Sequence", "decoders": []}, ["a", "b"])


# ---------------------------------------------------------------------------------------------
# from_config


def test_from_config_null() -> None:
    assert decoders.from_config(None) is None


@pytest.mark.parametrize(
    "cfg, words",
    [
        ({"type": "Nope"}, "Nope"),
        ({"replacement": "▁"}, "type"),
        ([1], "object"),
        ({"type": "Replace", "content": " "}, "pattern"),
        ({"type": "Replace", "pattern": {"Glob": "*"}, "content": ""}, "pattern"),
        ({"type": "Replace", "pattern": {"Regex": "("}, "content": ""}, "compile"),
        ({"type": "Metaspace", "replacement": "ab"}, "replacement"),
        ({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"},
         "prepend_scheme"),
        ({"type": "Metaspace", "replacement": "▁", "add_prefix_space": False,
          "prepend_scheme": "always"}, "add_prefix_space"),
        ({"type": "Strip", "content": "  ", "start": 1, "stop": 0}, "content"),
        ({"type": "Strip", "content": " ", "start": -1, "stop": 0}, "start"),
        ({"type": "Sequence"}, "decoders"),
        ({"type": "Sequence", "decoders": [None]}, "null"),
        ({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Bad"}]}, "Bad"),
    ],
)
def test_from_config_errors(cfg: object, words: str) -> None:
    with pytest.raises(FormatError, match=words):
        decoders.from_config(cfg)  # type: ignore[arg-type]


def test_from_config_ignores_unknown_fields_like_hf() -> None:
    assert_same({"type": "ByteFallback", "extra": 1}, ["<0x41>"])


# ---------------------------------------------------------------------------------------------
# transformers' clean_up_tokenization


def transformers_cleanup(text: str) -> str:
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    return PreTrainedTokenizerBase.clean_up_tokenization(None, text)  # type: ignore[arg-type]


def test_clean_up_tokenization_on_corpus() -> None:
    for chunk in corpus_chunks(300, seed=3):
        assert decoders.clean_up_tokenization(chunk) == transformers_cleanup(chunk)


@SETTINGS
@given(st.text(st.sampled_from(" .?!,'nmtsvredo\n"), max_size=40) | st.text(max_size=20))
def test_clean_up_tokenization_hypothesis(text: str) -> None:
    assert decoders.clean_up_tokenization(text) == transformers_cleanup(text)


# ---------------------------------------------------------------------------------------------
# Tokenizer.decode (the native core's decoder when it is built, else the pure one) against
# HF's whole-tokenizer decode: the table by id, added and special tokens, unknown ids


def _decode_doc(cfg: dict | None, tokens: list[str]) -> tuple[dict, list[int]]:
    """A tokenizer.json whose vocabulary is ``tokens`` (and two added tokens), and their ids."""
    vocab: dict[str, int] = {}
    for token in tokens:
        vocab.setdefault(token, len(vocab))
    n = len(vocab)
    added = [
        {"id": n, "content": "<|sp|>", "special": True, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False},
        {"id": n + 1, "content": "<0x41>", "special": False, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False},
    ]
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": cfg,
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }
    ids = [vocab[t] for t in tokens]
    return doc, ids


def assert_decode_same(cfg: dict | None, tokens: list[str], extra: list[int]) -> None:
    from tokenizers import Tokenizer as HFTokenizer

    import pymtok

    doc, ids = _decode_doc(cfg, tokens)
    n = len(doc["model"]["vocab"])
    # the added tokens and ids no vocabulary has (HF skips them) spliced in
    for k, e in enumerate(extra):
        ids.insert(e % (len(ids) + 1), n + k % 4)
    ours = pymtok.Tokenizer.from_config(doc)
    hf = HFTokenizer.from_str(json.dumps(doc))
    for skip in (False, True):
        assert ours.decode(ids, skip, False) == hf.decode(ids, skip_special_tokens=skip), (cfg, ids)
        assert ours.decode(tuple(ids), skip, False) == hf.decode(ids, skip_special_tokens=skip)
    assert ours.batch_decode([ids, ids[:3]], clean_up_tokenization_spaces=False) == hf.decode_batch(
        [ids, ids[:3]], skip_special_tokens=False
    )


extra_ids = st.lists(st.integers(0, 10**6), max_size=4)


@SETTINGS
@given(st.lists(chain_members, max_size=4), any_tokens, extra_ids)
def test_tokenizer_decode_chain(members: list[dict], tokens: list[str], extra: list[int]) -> None:
    assert_decode_same({"type": "Sequence", "decoders": members}, tokens, extra)


@SETTINGS
@given(st.one_of(chain_members, st.none()), any_tokens, extra_ids)
def test_tokenizer_decode_single(cfg: dict | None, tokens: list[str], extra: list[int]) -> None:
    assert_decode_same(cfg, tokens, extra)


# each fixture with its model's other tests, from the shared load
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_native_decoder_covers_every_fixture(name: str) -> None:
    from pymtok import native

    if native._core() is None:
        pytest.skip("pure path: no native decoder")
    assert native.accelerate_decode(ours(name)) is not None


def test_native_decoder_covers_sentencepiece_models_and_falls_back_where_it_must() -> None:
    import pymtok
    from pymtok import native

    if native._core() is None:
        pytest.skip("pure path: no native decoder")
    for path in [fixture_path("legacy", "sentencepiece", m) for m in ("test_model.model", "mistral-7b-v0.1.model")]:
        assert native.accelerate_decode(pymtok.load(path)) is not None, path
    # a regex Replace has no native step: the pure path decodes, exactly
    cfg = {"type": "Replace", "pattern": {"Regex": "a+"}, "content": "-"}
    doc, ids = _decode_doc(cfg, ["caab", "a", "b"])
    tok = pymtok.Tokenizer.from_config(doc)
    assert native.accelerate_decode(tok) is None
    assert tok.decode(ids) == "c-b-b"


def test_decoder_swapped_after_decode_is_used() -> None:
    import pymtok

    doc, ids = _decode_doc({"type": "Metaspace"}, ["▁a", "▁b"])
    tok = pymtok.Tokenizer.from_config(doc)
    assert tok.decode(ids) == "a b"
    tok.decoder = decoders.Fuse()
    assert tok.decode(ids) == "▁a▁b"
    tok.decoder = None
    assert tok.decode(ids) == "▁a ▁b"


@pytest.mark.parametrize("name", ["llama3", "gemma-v1", "chatglm3-6b", "all-minilm-l6-v2", "t5-small", "clip-vit"])
def test_fixture_random_ids_match_hf(name: str) -> None:
    """Any ids, unknown ones, specials and byte tokens that cut characters: HF's decode, and its
    DecodeStream step by step."""
    import pymtok
    from tokenizers.decoders import DecodeStream

    hf = hf_tokenizer(name)
    tok = pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))
    size = hf.get_vocab_size(with_added_tokens=True)
    special = sorted(tok.all_special_ids)
    # the byte pieces and the added tokens are where decoders differ most
    edge = [hf.token_to_id(f"<0x{b:02X}>") for b in (0xE3, 0x81, 0x82, 0xF0, 0x9F, 0x41, 0xFF)]
    edge = [i for i in edge if i is not None] + special + [size, size + 7]
    ids = st.lists(st.one_of(st.integers(0, size - 1), st.sampled_from(edge)), max_size=30)

    @settings(max_examples=examples(120), deadline=None, suppress_health_check=list(HealthCheck))
    @given(ids, st.booleans())
    def check(ids: list[int], skip: bool) -> None:
        assert tok.decode(ids, skip, False) == hf.decode(ids, skip_special_tokens=skip)
        ref, mine = DecodeStream(skip_special_tokens=skip), tok.decode_stream(skip)
        for id in ids:
            try:
                want = ref.step(hf, id)
            except Exception as exc:  # HF's "Invalid prefix encountered": a text that rewrote emitted text
                assert "Invalid prefix" in str(exc)
                with pytest.raises(ValueError, match="no longer starts with"):
                    mine.step(id)
                return
            assert mine.step(id) == want

    check()


def test_decode_argument_checks() -> None:
    import pymtok

    doc, ids = _decode_doc({"type": "Fuse"}, ["a", "b"])
    tok = pymtok.Tokenizer.from_config(doc)
    with pytest.raises(OverflowError):
        tok.decode([0, -1])
    with pytest.raises(OverflowError):
        tok.decode([0, 2**32])
    with pytest.raises(OverflowError):
        tok.decode((0, 2**80))
    for bad in ([0, True], [0, "1"], [0, 1.0], [None]):
        with pytest.raises(TypeError):
            tok.decode(bad)
    assert tok.decode([2**32 - 1, 1, 0]) == "ba"
    stream = tok.decode_stream()
    assert stream.step(0) == "a"
    for bad_id in (True, "1", -1, 2**32):
        with pytest.raises((TypeError, OverflowError)):
            stream.step(bad_id)  # type: ignore[arg-type]
    assert stream.step(1) == "b"  # the stream is as it was before the bad ids

