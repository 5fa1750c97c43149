"""Every source a model ships its tokenizer in, loaded and exported exactly against its own library.

.tiktoken files (the published encodings recognised from their ranks), BERT vocab.txt (casing
decided from the config or the vocabulary), GPT-2 vocab.json + merges.txt; folder discovery;
``pymtok verify --against`` and ``pymtok export`` on each; corrupt .tiktoken files.
"""

from __future__ import annotations

import base64
import functools
import random
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from conftest import corpus_chunks, examples, fixture_path
from corruption import corrupted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymtok
from pymtok import legacy
from pymtok.cli import main as cli_main
from pymtok.errors import FormatError
from pymtok.mtok import read_mtok, write_mtok

FAST, FULL = 150, 2000
# texts with the encodings' special tokens in them, matched as tiktoken's allowed_special="all" does
SPECIAL_TEXTS = [
    "a<|endoftext|>b", "<|endoftext|><|endoftext|>", " <|endofprompt|>x", "<|fim_prefix|>def<|fim_suffix|>",
    "<|im_start|>user\nhi<|im_end|>\n", "<|extra_3|>", "12345 apples",
]


@functools.lru_cache(maxsize=None)
def chunks(n: int) -> tuple[str, ...]:
    return tuple(corpus_chunks(n)) + tuple(SPECIAL_TEXTS)


def _write_tiktoken(ranks: dict[bytes, int], path: Path) -> Path:
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in sorted(ranks.items(), key=lambda x: x[1])))
    return path


def _ranks_from_vocab(vocab: dict[str, int], limit: int) -> dict[bytes, int]:
    from pymtok.byte_level import CHAR_TO_BYTE

    return {bytes(CHAR_TO_BYTE[c] for c in t): i for t, i in vocab.items() if i < limit}


def tiktoken_file(name: str, tmp_path: Path) -> Path:
    """A published vocabulary: the fixture file, or rebuilt from the same vocabulary's HF form."""
    if name in ("cl100k_base", "qwen"):
        return fixture_path("legacy", "tiktoken", f"{name}.tiktoken")
    if name == "o200k_base":
        vocab = json.loads(fixture_path("tokenizers", "gpt-4o", "tokenizer.json").read_bytes())["model"]["vocab"]
        return _write_tiktoken(_ranks_from_vocab(vocab, 199998), tmp_path / "o200k_base.tiktoken")
    vocab = json.loads(fixture_path("legacy", "gpt2-vocab-merges", "vocab.json").read_bytes())
    return _write_tiktoken(_ranks_from_vocab(vocab, 50256), tmp_path / "r50k_base.tiktoken")


ENCODING_NAMES = {"cl100k_base": "cl100k_base", "qwen": "Qwen-1", "o200k_base": "o200k_base", "r50k_base": "r50k_base"}


def _check_tiktoken(name: str, n: int, tmp_path: Path) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    file = tiktoken_file(name, tmp_path)
    ranks = load_tiktoken_bpe(str(file))
    # the oracle's pattern and specials are tiktoken's own for the published encodings
    if name == "qwen":
        pattern = legacy.QWEN_PATTERN
        specials = {t: 151643 + i for i, t in enumerate(
            ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *(f"<|extra_{k}|>" for k in range(205))])}
    else:
        import tiktoken_ext.openai_public as published

        # the constructor's loader is stubbed (no download): only its pattern and specials are used
        ref = getattr(published, name)()
        pattern, specials = ref["pat_str"], ref["special_tokens"]
    enc = tiktoken.Encoding(name=f"oracle-{name}", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    tok = pymtok.load(file)
    assert any(ENCODING_NAMES[name] in note for note in tok.meta.source_notes)
    # export() of a .tiktoken file is load() then this write, run by the CLI test below: the
    # file (seconds to read on the pure path) is read once here
    exported = read_mtok(write_mtok(tok, tmp_path / "tokenizer.mtok"))
    expected = [enc.encode(t, allowed_special="all") for t in chunks(n)]
    for reader in (tok, exported):
        for special in (False, True):
            bad = [t for t, ids in zip(chunks(n), expected) if reader.encode(t, add_special_tokens=special) != ids]
            assert bad[:3] == []
    for ids in expected[:200]:
        assert tok.decode(ids) == enc.decode(ids)
    # the example: cl100k groups digits by three, Qwen-1 splits each (checked here, where
    # the file is loaded: Qwen-1's takes seconds on the pure path)
    if name == "cl100k_base":
        assert tok.encode("12345 apples") == [4513, 1774, 41776]
    elif name == "qwen":
        assert tok.encode("12345 apples")[:5] == [16, 17, 18, 19, 20]
        assert tok.stop_ids == [151645, 151643]


@pytest.fixture(autouse=True)
def _offline_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """tiktoken_ext's constructors download their files: hand them a stub that returns nothing."""
    try:
        import tiktoken_ext.openai_public as published
    except ImportError:
        return
    monkeypatch.setattr(published, "load_tiktoken_bpe", lambda *a, **k: {})
    monkeypatch.setattr(published, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: {})


@pytest.mark.parametrize("name", ["cl100k_base", "qwen", "r50k_base"])
def test_tiktoken_published_encodings(name: str, tmp_path: Path) -> None:
    _check_tiktoken(name, FAST, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cl100k_base", "qwen", "r50k_base", "o200k_base"])
def test_tiktoken_published_encodings_full(name: str, tmp_path: Path) -> None:
    _check_tiktoken(name, FULL, tmp_path)


def test_unknown_tiktoken_vocabulary_warns_or_takes_a_pattern(tmp_path: Path) -> None:
    ranks = legacy.read_tiktoken_ranks(fixture_path("legacy", "tiktoken", "cl100k_base.tiktoken"))
    small = _write_tiktoken({t: r for t, r in ranks.items() if r < 2000}, tmp_path / "mine.tiktoken")
    with pytest.warns(UserWarning, match="not a published tiktoken vocabulary; assuming cl100k_base's split pattern"):
        tok = pymtok.load(small)
    assert "assuming" in tok.meta.source_notes[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        given_pattern = legacy.load_tiktoken(small, pattern=legacy.QWEN_PATTERN, special_tokens={"<|x|>": 5000})
    assert given_pattern.encode("12 <|x|>") == [16, 17, 220, 5000]
    proc = subprocess.run([sys.executable, "-m", "pymtok.cli", "info", str(small)], capture_output=True, text=True)
    assert proc.returncode == 0 and "assuming cl100k_base" in proc.stdout + proc.stderr


# -- BERT vocab.txt --------------------------------------------------------------------------


def _check_bert(vocab: Path, lowercase: bool, n: int, tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.BertWordPieceTokenizer(str(vocab), lowercase=lowercase)
    tok = pymtok.load(vocab)
    assert tok.meta.source_notes[0].startswith(f"BERT vocabulary, {'uncased' if lowercase else 'cased'}")
    exported = read_mtok(pymtok.export(vocab, tmp_path / "out"))
    for special in (False, True):
        expected = [hf.encode(t, add_special_tokens=special).ids for t in chunks(n)]
        for reader in (tok, exported):
            bad = [t for t, ids in zip(chunks(n), expected) if reader.encode(t, add_special_tokens=special) != ids]
            assert bad[:3] == []
    for t in chunks(n)[:200]:
        ids = hf.encode(t).ids
        for skip in (True, False):
            assert tok.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)


def _bare_uncased_vocab(tmp_path: Path) -> Path:
    folder = tmp_path / "uncased"
    folder.mkdir()
    shutil.copy(fixture_path("tokenizers", "all-minilm-l6-v2", "vocab.txt"), folder / "vocab.txt")
    return folder / "vocab.txt"


def test_bert_casing_from_the_vocabulary(tmp_path: Path) -> None:
    _check_bert(fixture_path("legacy", "bert-vocab", "bert-base-cased-vocab.txt"), False, FAST, tmp_path)
    _check_bert(_bare_uncased_vocab(tmp_path), True, FAST, tmp_path / "u")


@pytest.mark.slow
def test_bert_casing_from_the_vocabulary_full(tmp_path: Path) -> None:
    _check_bert(fixture_path("legacy", "bert-vocab", "bert-base-cased-vocab.txt"), False, FULL, tmp_path)
    _check_bert(_bare_uncased_vocab(tmp_path), True, FULL, tmp_path / "u")


def test_bert_do_lower_case_in_the_config_wins(tmp_path: Path) -> None:
    vocab = _bare_uncased_vocab(tmp_path)
    (vocab.parent / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    tok = pymtok.load(vocab.parent)
    assert "do_lower_case" in tok.meta.source_notes[0] and "cased" in tok.meta.source_notes[0]
    assert tok.encode("Hello", add_special_tokens=False) == [100]  # [UNK]: "Hello" is not in an uncased vocabulary
    proc = subprocess.run([sys.executable, "-m", "pymtok.cli", "info", str(vocab.parent)], capture_output=True, text=True)
    assert proc.returncode == 0 and "BERT vocabulary, cased (tokenizer_config.json's do_lower_case)" in proc.stdout


# -- GPT-2 vocab.json + merges.txt -----------------------------------------------------------


def _check_vocab_merges(n: int, tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    folder = fixture_path("legacy", "gpt2-vocab-merges")
    hf = tokenizers.ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    tok = pymtok.load(folder)
    exported = read_mtok(pymtok.export(folder, tmp_path))
    expected = [hf.encode(t).ids for t in chunks(n)]
    for reader in (tok, exported):
        for special in (False, True):
            bad = [t for t, ids in zip(chunks(n), expected) if reader.encode(t, add_special_tokens=special) != ids]
            assert bad[:3] == []
    for ids in expected[:200]:
        assert tok.decode(ids) == hf.decode(ids)


def test_vocab_merges_folder(tmp_path: Path) -> None:
    _check_vocab_merges(FAST, tmp_path)


@pytest.mark.slow
def test_vocab_merges_folder_full(tmp_path: Path) -> None:
    _check_vocab_merges(FULL, tmp_path)


# -- folders, the CLI ------------------------------------------------------------------------


def test_folders_without_a_tokenizer_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="no tokenizer in this folder"):
        pymtok.load(tmp_path)
    for name in ("a.tiktoken", "b.tiktoken"):
        shutil.copy(fixture_path("legacy", "tiktoken", "qwen.tiktoken"), tmp_path / name)
    with pytest.raises(FormatError, match=r"several \*\.tiktoken files"):
        pymtok.load(tmp_path)
    (tmp_path / "vocab.json").write_text("{}")
    (tmp_path / "a.tiktoken").unlink()
    (tmp_path / "b.tiktoken").unlink()
    with pytest.raises(FormatError, match="vocab.json without merges.txt"):
        pymtok.load(tmp_path)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    # in this process: test_cli.py runs export and verify through the installed command, and a
    # subprocess for each call here would add seconds of imports
    status = cli_main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, status, out, err)


def test_cli_verify_says_which_oracle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cl100k = fixture_path("legacy", "tiktoken", "cl100k_base.tiktoken")
    proc = _cli(capsys, "export", str(cl100k), "-o", str(tmp_path / "t"))
    assert proc.returncode == 0, proc.stderr
    assert "tiktoken encoding cl100k_base" in proc.stdout and "30/30" in proc.stdout
    proc = _cli(capsys, "verify", str(tmp_path / "t" / "tokenizer.mtok"), "--against", str(cl100k))
    assert proc.returncode == 0 and "(tiktoken (cl100k_base))" in proc.stdout, proc.stdout + proc.stderr
    gguf = fixture_path("gguf", "ggml-vocab-bert-bge.gguf")
    proc = _cli(capsys, "export", str(gguf), "-o", str(tmp_path / "g"))
    assert proc.returncode == 0 and (tmp_path / "g" / "tokenizer.mtok").is_file(), proc.stderr
    proc = _cli(capsys, "verify", str(tmp_path / "g" / "tokenizer.mtok"), "--against", str(gguf))
    assert proc.returncode == 0 and "pymtok's exact reading of ggml-vocab-bert-bge.gguf" in proc.stdout
    bert = fixture_path("legacy", "bert-vocab")
    proc = _cli(capsys, "verify", str(bert), "--against", str(bert))
    assert proc.returncode == 0 and "HF BertWordPieceTokenizer (cased" in proc.stdout, proc.stdout + proc.stderr
    (tmp_path / "empty").mkdir()
    proc = _cli(capsys, "verify", str(tmp_path / "g" / "tokenizer.mtok"), "--against", str(tmp_path / "empty"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "no tokenizer" in proc.stderr


# -- corrupt .tiktoken files -----------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _small_tiktoken() -> bytes:
    lines = fixture_path("legacy", "tiktoken", "cl100k_base.tiktoken").read_bytes().splitlines(keepends=True)
    return b"".join(lines[:400])


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corrupt_tiktoken_files_are_format_errors(data: st.DataObject, tmp_path: Path) -> None:

    def forge_rank(raw: bytearray, rng: random.Random) -> None:
        raw += b"IQ== " + str(rng.choice([2**31, 10**12, 2**63, 10**40])).encode() + b"\n"

    path = tmp_path / "c.tiktoken"
    path.write_bytes(corrupted(_small_tiktoken(), data.draw(st.randoms(use_true_random=False)), forge_rank))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tok = pymtok.load(path)
        except FormatError:
            return
    tok.encode("Hello world 123")


def test_txt_export_lists_what_it_loses(tmp_path: Path) -> None:
    """A .txt cannot hold a tiktoken split pattern or a BERT vocabulary's casing: export says so."""
    import shutil

    from pymtok.export import export_report

    (tmp_path / "tk").mkdir()
    # cl100k's first ranks, read with its pattern (test_unknown_tiktoken_vocabulary_warns_or_takes_a_pattern):
    # the whole vocabulary takes seconds to read and compare, and loses nothing more
    (tmp_path / "tk" / "mine.tiktoken").write_bytes(_small_tiktoken())
    (tmp_path / "bert").mkdir()
    shutil.copy(fixture_path("legacy", "bert-vocab", "bert-base-cased-vocab.txt"), tmp_path / "bert" / "vocab.txt")
    with pytest.warns(UserWarning, match="assuming cl100k_base's split pattern"):
        _, lost = export_report(tmp_path / "tk", tmp_path / "tk-out", format="txt")
    assert any(item.startswith("pre_tokenizer: ") and "p{N}{1,3}" in item for item in lost), lost
    _, lost = export_report(tmp_path / "bert", tmp_path / "bert-out", format="txt")
    assert any(item.startswith("normalizer: ") and '"lowercase": false' in item for item in lost), lost
    with pytest.warns(UserWarning, match="is not exact"):
        pymtok.export(tmp_path / "bert", tmp_path / "bert-out2", format="txt")
    _, lost = export_report(fixture_path("legacy", "gpt2-vocab-merges"), tmp_path / "gpt2", format="txt")
    assert lost == []  # type 3 holds GPT-2's vocabulary and merges exactly


def test_info_on_a_txt_says_what_it_assumes(tmp_path: Path) -> None:
    """A type-1 or type-2 .txt stores no split pattern or casing: info names the assumption."""
    import shutil
    import subprocess
    import sys

    (tmp_path / "bert").mkdir()
    shutil.copy(fixture_path("legacy", "bert-vocab", "bert-base-cased-vocab.txt"), tmp_path / "bert" / "vocab.txt")
    with pytest.warns(UserWarning, match="is not exact"):
        bert_txt = pymtok.export(tmp_path / "bert", tmp_path / "out", format="txt")
    for path, words in ((fixture_path("mnn-toy", "tt.txt"), "split pattern not stored"), (bert_txt, "casing not stored")):
        out = subprocess.run(
            [sys.executable, "-m", "pymtok", "info", str(path)], capture_output=True, text=True, check=True,
        ).stdout
        assert words in out, out
