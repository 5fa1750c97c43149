""".mtok reader and writer: MNN's layout (FORMAT.md §1–§5), MNN's own files, the exactness
extension and its interplay with MNN's post-processor heuristic, and corrupt input."""

from __future__ import annotations

import dataclasses
import json
import random
import struct
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import pytest
from conftest import TOKENIZER_NAMES, corpus_chunks, fixture_path, full_tier, hf_tokenizer

from pymtok.errors import FormatError
from pymtok.mtok import EXTENSION_MAGIC, EXTENSION_VERSION, dumps_mtok, extension_block, loads_mtok, mnn_bytes, read_mtok
from pymtok.tokenizer import TokenizerMeta

# FORMAT.md §7, byte for byte: WordPiece, BertPreTokenizer, one added token, empty trailer
SPEC_EXAMPLE = bytes.fromhex(
    "34333020340a" "3120302030 0a" "300a"
    "00" "05" "01 03000000" "0500 5b554e4b5d" "0200 2323" "64000000"
    "0300 232362 02000000" "0500 5b554e4b5d 00000000" "0100 61 01000000"
    "03 0200 2323 01"
    "01000000" "00000000 01 00 00 0500 5b554e4b5d"
    "00000000" "0000" "00" "0000" "0000".replace(" ", "")
)


def test_spec_example_loads_and_encodes() -> None:
    assert len(SPEC_EXAMPLE) == 98
    tok = loads_mtok(SPEC_EXAMPLE)
    assert tok.encode("ab a") == [1, 2, 1]
    assert tok.decode([1, 2, 1]) == "ab a"
    assert tok.special_ids == [0] and tok.stop_ids == [] and tok.prefix_ids == []
    assert tok.post_processor is None  # count 0 hits the legacy branch with no ids: identity


def _toy_config(single: list[dict] | None = None) -> dict:
    """A small byte-level BPE with a chat template and a post-processor."""
    vocab = {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġa": 4, "<s>": 5}
    post = None
    if single is not None:
        post = {
            "type": "TemplateProcessing", "single": single,
            "pair": single + [{"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}},
        }
    return {
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "vocab": vocab, "merges": [["a", "b"], ["Ġ", "a"]], "ignore_merges": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "post_processor": post,
        "added_tokens": [{"id": 5, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}],
    }


def _toy_meta() -> TokenizerMeta:
    return TokenizerMeta(
        special_ids=[5], stop_ids=[5], prefix_ids=[], chat_template="{{ bos_token }}{{ messages[0]['content'] }}",
        special_tokens={"bos_token": "<s>", "eos_token": "<s>"}, clean_up_tokenization_spaces=False,
    )


S, A = {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}


def test_round_trip_keeps_config_and_meta() -> None:
    config, meta = _toy_config([S, A]), _toy_meta()
    tok = loads_mtok(dumps_mtok(config, meta))
    assert tok.encode("ab a") == [5, 2, 4]
    assert tok.encode("ab a", add_special_tokens=False) == [2, 4]
    assert tok.decode([5, 2, 4]) == "<s>ab a"
    assert tok.meta == dataclasses.replace(meta, extension_version=EXTENSION_VERSION, mnn_layout="device")
    assert loads_mtok(mnn_bytes(config, meta)[0]).meta.extension_version is None
    for key in ("normalizer", "pre_tokenizer", "decoder", "post_processor", "added_tokens"):
        assert tok.config[key] == config[key]
    assert tok.config["model"]["ignore_merges"] is True


def test_older_files_model_max_length_reads_into_call_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written before model_max_length lived in call_settings alone kept it apart too."""
    import json

    from pymtok import mtok

    original = mtok.extension_payload

    def older(*args, **kwargs):  # type: ignore[no-untyped-def]
        payload = json.loads(original(*args, **kwargs))
        payload["call_settings"] = {"padding_side": "left"}
        payload["model_max_length"] = 77
        return json.dumps(payload).encode("utf-8")

    monkeypatch.setattr(mtok, "extension_payload", older)
    data = dumps_mtok(_toy_config([S, A]), _toy_meta())
    monkeypatch.undo()
    assert loads_mtok(data).meta.call_settings == {"padding_side": "left", "model_max_length": 77}
    meta = dataclasses.replace(_toy_meta(), call_settings={"model_max_length": 64})
    assert loads_mtok(dumps_mtok(_toy_config([S, A]), meta)).meta.call_settings == {"model_max_length": 64}


def _mnn_reads_legacy_ops(data: bytes, config: dict, meta: TokenizerMeta) -> bool:
    """MNN's §5.2 test: the bytes after the op count number exactly 4 × count."""
    body, ops = mnn_bytes(config, meta)
    count_at = len(body) - sum(1 if op == 0 else 5 for op, _ in ops) - 2
    return len(data) - (count_at + 2) == 4 * len(ops)


@pytest.mark.parametrize("n_a, n_s", [(0, 0), (1, 0), (1, 1), (1, 3), (2, 6), (5, 1), (40, 2), (300, 0)])
def test_extension_never_triggers_the_legacy_heuristic(n_a: int, n_s: int) -> None:
    ops = [(0, 0)] * n_a + [(1, 7)] * n_s
    fatal = 3 * n_a - n_s  # the block length that would make MNN read the ops as raw ids
    for size in {max(fatal - 14, 0), max(fatal - 15, 0), 3, 100}:
        block = extension_block(b"x" * size, ops)
        assert len(block) != fatal
        assert block.startswith(EXTENSION_MAGIC)
        assert len(block) in (14 + size, 15 + size)


@pytest.mark.parametrize("single", [[A], [S, A], [S, A, S], [S, S, A, S], [A, A, A, S, S]])
def test_extension_keeps_mnn_reading_the_op_list(single: list[dict]) -> None:
    config, meta = _toy_config(single), _toy_meta()
    data = dumps_mtok(config, meta)
    assert not _mnn_reads_legacy_ops(data, config, meta)
    assert loads_mtok(data).encode("a") == [0 if item is A else 5 for item in single]


def test_cut_off_extension_is_mnn_only_reading() -> None:
    config, meta = _toy_config([S, A, S]), _toy_meta()
    data = dumps_mtok(config, meta)
    mnn = data[: data.rfind(EXTENSION_MAGIC)]
    tok = loads_mtok(mnn)
    assert tok.encode("ab") == [5, 2, 5]
    assert "ignore_merges" not in tok.config["model"]
    assert tok.meta.special_tokens == {"bos_token": "<s>", "eos_token": "<s>"}


def test_legacy_post_processor_heuristic_is_reproduced() -> None:
    # [S, S, A, S]: 3 specials per sequence, so MNN (and we, without the extension) read raw ids
    config = _toy_config([S, S, A, S])
    data = dumps_mtok(config, _toy_meta())
    mnn = data[: data.rfind(EXTENSION_MAGIC)]
    assert _mnn_reads_legacy_ops(mnn, config, _toy_meta())
    single = loads_mtok(mnn).config["post_processor"]["single"]
    assert single[0] == {"Sequence": {"id": "A", "type_id": 0}} and len(single) == 5
    assert loads_mtok(data).encode("a") == [5, 5, 0, 5]  # with the extension: exact


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: b"431" + d[3:], "bad magic"),
        (lambda d: d.replace(b"430 4", b"430 1", 1), "legacy"),
        (lambda d: d.replace(b"1 0 0\n", b"2 0 0\n", 1), "announce"),
        (lambda d: d.replace(b"1 0 0\n0\n", b"1 0 0\n4294967295\n", 1), "not a valid token id"),
        (lambda d: d[:14] + b"\x09" + d[15:], "unknown type code 9"),
        (lambda d: d[:15] + b"\x07" + d[16:], "unknown type code 7"),
        (lambda d: d[:16] + b"\x03" + d[17:], "unknown type code 3"),
        (lambda d: d[:16] + b"\x01\xff\xff\xff\x7f" + d[21:], "cannot fit"),
        (lambda d: d[:0x3F] + b"\x09" + d[0x40:], "unknown type code 9"),
        (lambda d: d[:0x29] + b"\x00\x00\x00\x00" + d[0x2D:], "two tokens"),
        (lambda d: d[:0x26] + b"\xff\xfe" + d[0x28:], "UTF-8"),
        (lambda d: d[:0x5F], "truncated"),
        (lambda d: d + b"\x00", "unexpected bytes"),
        (lambda d: d[:-2] + b"\x01\x00\x05", "unknown op type 5"),
    ],
)
def test_corrupt_spec_example_names_section_and_offset(mutate, message: str) -> None:
    with pytest.raises(FormatError, match=message) as err:
        loads_mtok(mutate(SPEC_EXAMPLE), "t.mtok")
    assert "t.mtok" in str(err.value) and "byte" in str(err.value)


def test_merges_naming_missing_ids_and_bad_extension() -> None:
    data = dumps_mtok(_toy_config([S, A]), _toy_meta())
    # the first merge record follows the vocabulary; find it by its known (id1, id2, rank)
    at = data.index(struct.pack("<III", 0, 1, 0))
    broken = data[:at] + struct.pack("<III", 0, 99, 0) + data[at + 12 :]
    with pytest.raises(FormatError, match="merges at byte .*id 99"):
        loads_mtok(broken)
    start = data.rfind(EXTENSION_MAGIC)
    with pytest.raises(FormatError, match="extension .*version 9"):
        loads_mtok(data[: start + 8] + b"\x09" + data[start + 9 :])
    with pytest.raises(FormatError, match="extension"):
        loads_mtok(data[:-1])
    payload = json.dumps({"model": {}}).encode()
    with pytest.raises(FormatError, match="extension .*field"):
        loads_mtok(data[:start] + extension_block(payload, []))


HUGE_ID_SCRIPT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from pymtok.mtok import loads_mtok
tok = loads_mtok(sys.stdin.buffer.read())
assert tok.encode("ab <s>", add_special_tokens=False) == [2, 3, 2**31 - 1]
"""


def test_huge_sparse_id_with_native_core() -> None:
    pytest.importorskip("pymtok._native")
    config = _toy_config([S, A])
    config["model"]["vocab"] = {**config["model"]["vocab"], "<s>": 2**31 - 1}
    config["added_tokens"][0]["id"] = 2**31 - 1
    data = dumps_mtok(config, _toy_meta())
    proc = subprocess.run([sys.executable, "-c", HUGE_ID_SCRIPT], input=data, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-500:]


def test_sparse_ids_are_legal() -> None:
    config = _toy_config([S, A])
    config["model"]["vocab"] = {**config["model"]["vocab"], "<s>": 1000}
    config["added_tokens"][0]["id"] = 1000
    tok = loads_mtok(dumps_mtok(config, _toy_meta()))
    assert tok.token_to_id("<s>") == 1000


def test_wordpiece_sparse_ids_keep_their_words() -> None:
    """The native core builds a WordPiece .mtok's maps in id order, the dense ids' records then
    the sparse ones': every word keeps its id, whole and as a continuation, as HF finds them."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "a": 2, "b": 3, "##b": 4, "ab": 5, "##c": 6, "c": 7, "x": 9, "abc": 5000, "##x": 6000,
             "zz": 7000, "##zz": 1}
    config = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"}, "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }
    hf = tokenizers.Tokenizer.from_str(json.dumps(config))
    tok = loads_mtok(dumps_mtok(config, TokenizerMeta()))
    text = "abc abcb ax abx zz zzzz azz ab c, x! q abcx ABC"
    assert tok.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids
    assert {5000, 6000, 7000, 1} <= set(tok.encode(text, add_special_tokens=False))


# -- MNN's own files ------------------------------------------------------------------------

TOY_FILES = ["bert.mtok", "bytebpe.mtok", "llama.mtok", "min.mtok", "misc1.mtok", "misc2.mtok", "unigram.mtok"]


@pytest.mark.parametrize("name", TOY_FILES)
def test_mnn_toy_files_load_and_run(name: str) -> None:
    tok = read_mtok(fixture_path("mnn-toy", name))
    lines = fixture_path("mnn-toy", "mnn_cpp_outputs.jsonl").read_text(encoding="utf-8").splitlines()
    inputs = [bytes.fromhex(r["input_hex"]).decode("utf-8") for r in map(json.loads, lines) if r["file"] == name and "input_hex" in r]
    for text in inputs + ["Hello world", "", "  é ① 12 "]:
        ids = tok.encode(text)
        tok.encode(text, add_special_tokens=False)
        assert isinstance(tok.decode(ids), str)


def test_mnn_toy_interpretation() -> None:
    bert = read_mtok(fixture_path("mnn-toy", "bert.mtok"))
    assert bert.config["normalizer"]["strip_accents"] is True
    misc1 = read_mtok(fixture_path("mnn-toy", "misc1.mtok"))
    assert misc1.config["normalizer"]["normalizers"][0] == {"type": "NFKC"}
    # ops [S1, S0, A, S0] are misread by MNN's heuristic; so are they by a reader of MNN's files
    unigram = read_mtok(fixture_path("mnn-toy", "unigram.mtok"))
    assert unigram.config["post_processor"]["single"][0] == {"Sequence": {"id": "A", "type_id": 0}}


# Whether MNN's lossy mapping (FORMAT.md §4) still gives HF's ids and decode on the sample below.
# Measured; the reasons for the inexact ones are in BEHAVIOR.md §12.1 and FORMAT.md §4.
MNN_ONLY_EXACT = {
    "albert-base-v2": True,     # NFKD→NFKC table + StripAccents→NFD strip: same on this sample
    "all-minilm-l6-v2": True,
    "bert-base-chinese": True,
    "chatglm3-6b": True,        # MergedWithNext→Removed only touches "<!dummy-prefix!>", absent from text
    "clip-vit": False,          # end_of_word_suffix "</w>", Regex Replace and RobertaProcessing dropped
    "deepseek-v3": True,
    "falcon": False,            # Punctuation pre-tokenizer dropped
    "gemma-v1": True,
    "gpt-4o": True,
    "llama3": False,            # ignore_merges dropped
    "mistral-7b-v0.1": True,
    "phi-3-mini": True,
    "qwen3": True,              # NFC table read back as HF's NFC
    "roberta-base": False,      # RobertaProcessing dropped (no <s> ... </s>)
    "t5-small": False,          # Precompiled charsmap approximated by NFKC
}

MNN_SAMPLE = 120


@cache
def mnn_sample() -> list[str]:
    return corpus_chunks(MNN_SAMPLE, seed=7)


def reading_is_exact(tok, name: str) -> bool:
    hf = hf_tokenizer(name)
    for text in mnn_sample():
        for special in (True, False):
            if tok.encode(text, add_special_tokens=special) != hf.encode(text, add_special_tokens=special).ids:
                return False
        ids = hf.encode(text, add_special_tokens=False).ids
        if tok.decode(ids) != hf.decode(ids, skip_special_tokens=False):
            return False
    return True


@pytest.mark.parametrize("name", [n for n in TOKENIZER_NAMES if n != "chatglm3-6b"])
def test_mnn_exported_files_load(name: str) -> None:
    tok = read_mtok(fixture_path("mnn-exported", name, "tokenizer.mtok"))
    assert tok.vocab_size > 0
    if MNN_ONLY_EXACT[name]:
        assert reading_is_exact(tok, name)


@pytest.mark.parametrize("name", [n for n in TOKENIZER_NAMES if n != "chatglm3-6b" and not MNN_ONLY_EXACT[n]])
def test_mnn_exported_files_run_what_they_hold(name: str, tmp_path: Path) -> None:
    """An MNN-only file that cannot hold its source's pipeline still runs the pipeline it holds
    exactly: HF ``tokenizers`` on that pipeline (the reader's configuration, saved as
    tokenizer.json) gives the same ids."""
    if not full_tier() and name != "t5-small":
        pytest.skip("the fast tier runs one such file (the one whose pipeline is all native)")
    tokenizers = pytest.importorskip("tokenizers")
    tok = read_mtok(fixture_path("mnn-exported", name, "tokenizer.mtok"))
    tok.save(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    texts = mnn_sample() + [" \u3000 ".join(mnn_sample()) * 3]  # one long enough to be read in parts
    for text in texts:
        for special in (True, False):
            assert tok.encode(text, add_special_tokens=special) == hf.encode(text, add_special_tokens=special).ids


# -- corrupt input --------------------------------------------------------------------------


def _fuzz_sources() -> list[bytes]:
    ours = dumps_mtok(_toy_config([S, A, S]), _toy_meta())
    return [ours, ours[: ours.rfind(EXTENSION_MAGIC)], SPEC_EXAMPLE] + [
        fixture_path("mnn-toy", n).read_bytes() for n in ("bytebpe.mtok", "llama.mtok", "unigram.mtok")
    ]


def _load_or_format_error(data: bytes) -> None:
    started = time.perf_counter()
    try:
        tok = loads_mtok(data)
        # a loadable file may still name e.g. an unk token its vocabulary lacks: HF, too,
        # only reports that when encoding needs it
        tok.decode(tok.encode("Hello ab wörld <s>"))
    except FormatError:
        pass
    # generous: a bounded read is quick on any machine; an unbounded one runs for minutes
    assert time.perf_counter() - started < 60


@pytest.fixture(params=["pure", "native"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    # the native reader validates the model tables in C: both readers must reject what is corrupt
    if request.param == "native":
        pytest.importorskip("pymtok._native")
        monkeypatch.delenv("PYMTOK_PURE", raising=False)
    else:
        monkeypatch.setenv("PYMTOK_PURE", "1")


def test_truncation_at_every_offset(path: None) -> None:
    for data in _fuzz_sources():
        offsets = set(range(min(4096, len(data)))) | set(range(max(0, len(data) - 4096), len(data)))
        for cut in sorted(offsets):
            _load_or_format_error(data[:cut])


def test_random_byte_flips(path: None) -> None:
    rng = random.Random(1234)
    for source in _fuzz_sources():
        for _ in range(500):
            data = bytearray(source)
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            _load_or_format_error(bytes(data))
