"""``pymtok tokenize``: corpus files (text, JSON Lines, Parquet) to Parquet shards whose ids equal
HF ``tokenizers``' on the model's own file, record for record; bad records reported with their
numbers; a run killed with SIGKILL and rerun gives every record once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_dir, examples, fixture_path, hf_tokenizer
from hypothesis import example, given, settings
from hypothesis import strategies as st

import pymtok
from pymtok.cli import main as cli_main

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

NAME = "qwen3"
CORPUS_FILES = ["en_prose_sherlock_holmes.txt", "zh_udhr_hans.txt", "emoji_unicode_emoji_test.txt"]


# the session's export: these tests are spread over the workers, between other modules'
@pytest.fixture(scope="session")
def mtok(exported_mtok: Any) -> Path:
    return exported_mtok(NAME)


def oracle(texts: list[str], special: bool = True, name: str = NAME) -> list[list[int]]:
    return [e.ids for e in hf_tokenizer(name).encode_batch(texts, add_special_tokens=special)]


def lines_of(path: Path, limit: int | None = None) -> list[str]:
    """The records of a text file as tokenize reads them: each line less its line break."""
    lines = path.read_bytes().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    lines = lines[:limit]
    return [line.removesuffix(b"\r").decode("utf-8") for line in lines]


def shards(out: Path, name: str) -> list[Path]:
    return sorted(out.glob(f"{name}.*.parquet"))


def read_records(out: Path, name: str) -> tuple[list[int], list[list[int]]]:
    numbers: list[int] = []
    ids: list[list[int]] = []
    for shard in shards(out, name):
        table = pq.read_table(shard)
        numbers.extend(table["record"].to_pylist())
        ids.extend(table["input_ids"].to_pylist())
    return numbers, ids


def tokenize(*args: Any) -> int:
    return cli_main(["tokenize", *map(str, args)])


def test_text_files_to_shards_equal_hf(mtok: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = []
    for name in CORPUS_FILES:
        path = tmp_path / name
        path.write_text("\n".join(lines_of(corpus_dir() / name, 300)) + "\n", encoding="utf-8")
        inputs.append(path)
    out = tmp_path / "out"
    assert tokenize(*inputs, "-o", out, "--tokenizer", mtok, "--shard-size", 120, "--batch-size", 50, "--bin") == 0
    for path in inputs:
        texts = lines_of(path)
        numbers, ids = read_records(out, path.name)
        assert numbers == list(range(1, len(texts) + 1))
        assert ids == oracle(texts)
        assert len(shards(out, path.name)) == -(-len(texts) // 120)
        # .bin/.idx: the same ids, flat, with one offset per row and one more
        for shard in shards(out, path.name):
            table = pq.read_table(shard)
            flat = array("I")
            flat.frombytes(shard.with_suffix(".bin").read_bytes())
            offsets = array("q")
            offsets.frombytes(shard.with_suffix(".idx").read_bytes())
            if sys.byteorder == "big":
                flat.byteswap()
                offsets.byteswap()
            assert len(offsets) == table.num_rows + 1
            rows = table["input_ids"].to_pylist()
            assert [list(flat[a:b]) for a, b in zip(offsets, offsets[1:])] == rows
    assert "0 bad records" in capsys.readouterr().out
    # a rerun finds everything written and writes nothing
    before = {p: p.stat().st_mtime_ns for p in out.iterdir()}
    assert tokenize(*inputs, "-o", out, "--tokenizer", mtok, "--shard-size", 120, "--batch-size", 50, "--bin") == 0
    assert "(0 written" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_jsonl_bad_records_are_counted_with_their_lines(
    mtok: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = lines_of(corpus_dir() / "ko_konlpy_law_bills.txt", 40)
    rows: list[bytes] = [json.dumps({"body": t, "id": k}).encode() for k, t in enumerate(texts)]
    bad = {
        3: b'{"body": 12}',
        7: b'{"title": "no body"}',
        11: b"not json at all",
        13: b"[1, 2]",
        17: b'{"body": "caf\xe9"}',  # Latin-1, not UTF-8
        19: b'{"body": "lone \\ud800 surrogate"}',
        23: b"",
    }
    for number, raw in bad.items():
        rows[number - 1] = raw
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b"\n".join(rows) + b"\n")
    out = tmp_path / "out"
    assert tokenize(path, "-o", out, "--tokenizer", mtok, "--field", "body", "--batch-size", 8, "--no-special") == 0
    captured = capsys.readouterr()
    assert f"{len(bad)} bad records" in captured.out
    for number in bad:
        assert f"{path}:{number}: " in captured.err
    assert "no field 'body'" in captured.err and "not UTF-8" in captured.err and "lone surrogate" in captured.err
    numbers, ids = read_records(out, path.name)
    good = [k for k in range(1, len(rows) + 1) if k not in bad]
    assert numbers == good
    assert ids == oracle([texts[k - 1] for k in good], special=False)
    listed = [json.loads(line)[0] for line in (out / "docs.jsonl.00000.bad.jsonl").read_text().splitlines()]
    assert listed == sorted(bad)


def test_parquet_input_across_row_groups(mtok: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts: list[str | None] = list(lines_of(corpus_dir() / "hi_udhr.txt", 250))
    texts[5] = None
    path = tmp_path / "hi.parquet"
    pq.write_table(pa.table({"text": texts, "n": list(range(len(texts)))}), path, row_group_size=37)
    out = tmp_path / "out"
    assert tokenize(path, "-o", out, "--tokenizer", mtok, "--shard-size", 60, "--batch-size", 16) == 0
    assert "1 bad records" in capsys.readouterr().out
    numbers, ids = read_records(out, path.name)
    assert numbers == [k + 1 for k in range(len(texts)) if k != 5]
    assert ids == oracle([t for t in texts if t is not None])


def test_workers_give_the_same_shards(mtok: Path, tmp_path: Path) -> None:
    path = tmp_path / "ja.txt"
    path.write_text("\n".join(lines_of(corpus_dir() / "ja_wagahaiwa_nekodearu.txt", 400)) + "\n", encoding="utf-8")
    assert tokenize(path, "-o", tmp_path / "one", "--tokenizer", mtok, "--shard-size", 100) == 0
    assert tokenize(path, "-o", tmp_path / "two", "--tokenizer", mtok, "--shard-size", 100, "--workers", 2) == 0
    assert read_records(tmp_path / "one", path.name) == read_records(tmp_path / "two", path.name)
    assert read_records(tmp_path / "two", path.name)[1] == oracle(lines_of(path))


def test_a_rerun_with_other_settings_is_refused(mtok: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ru.txt"
    path.write_text("\n".join(lines_of(corpus_dir() / "ru_udhr.txt", 50)) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert tokenize(path, "-o", out, "--tokenizer", mtok) == 0
    assert tokenize(path, "-o", out, "--tokenizer", mtok, "--no-special") == 2
    assert "other settings" in capsys.readouterr().err
    other = pymtok.export(fixture_path("tokenizers", "all-minilm-l6-v2"), tmp_path / "bert")
    assert tokenize(path, "-o", out, "--tokenizer", other) == 2
    assert tokenize(tmp_path / "ru.csv", "-o", out, "--tokenizer", mtok) == 2
    assert "--format" in capsys.readouterr().err


def test_killed_run_resumes_without_duplicates_or_gaps(mtok: Path, tmp_path: Path) -> None:
    inputs = []
    for name in CORPUS_FILES:
        path = tmp_path / name
        path.write_text("\n".join(lines_of(corpus_dir() / name, 600)) + "\n", encoding="utf-8")
        inputs.append(path)
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "pymtok", "tokenize", *map(str, inputs), "-o", str(out), "--tokenizer", str(mtok),
        "--shard-size", "4", "--batch-size", "2", "--bin",
    ]
    total = sum(-(-len(lines_of(p)) // 4) for p in inputs)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    # killed once some shards are written, with no chance to clean up
    while first.poll() is None and len(list(out.glob("*.parquet"))) < 5:
        time.sleep(0.005)  # a busy loop would take a core from the run it watches
    first.send_signal(signal.SIGKILL)
    first.wait()
    written = len(list(out.glob("*.parquet")))
    if written >= total:
        pytest.fail(f"the run finished ({written} of {total} shards) before it was killed: use smaller shards")
    second = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    assert f"{total} shards" in second.stdout and f"{written} already there" in second.stdout
    assert not list(out.glob("*.tmp-*"))
    for path in inputs:
        texts = lines_of(path)
        numbers, ids = read_records(out, path.name)
        assert numbers == list(range(1, len(texts) + 1))
        assert ids == oracle(texts)


def expected_records(data: bytes) -> tuple[list[int], list[str], list[int]]:
    """(numbers, texts, bad numbers) of a text file: records split at b"\\n" only, one trailing
    b"\\r" dropped, a record that is not UTF-8 bad."""
    raws = data.split(b"\n")
    if raws[-1] == b"":
        raws.pop()
    numbers, texts, bad = [], [], []
    for number, raw in enumerate(raws, 1):
        try:
            texts.append(raw.removesuffix(b"\r").decode("utf-8"))
            numbers.append(number)
        except UnicodeDecodeError:
            bad.append(number)
    return numbers, texts, bad


PIECES = [b"a", b" word", b"\n", b"\r\n", b"\r", "\u2028".encode(), "\x85\x0b\x0c\x1c".encode(), "é猫".encode(), b"\xff", b"\xe7\x8c"]


# a byte-level BPE of a smaller vocabulary than NAME's: each example loads the file anew, and
# reads it on the pure path in a third of the time; run with the model's group, which exports it
@pytest.mark.parametrize("name", ["roberta-base"])
@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40), st.sampled_from([1, 3, 1000]))
@example([b"a", b"\r\n", b"\xff", b"\r", b"\n", "\u2028".encode(), b" word", b"\r"], 1000)  # CR at the end
def test_text_records_are_the_lines_between_newlines(
    name: str, exported_mtok: Any, tmp_path_factory: pytest.TempPathFactory, pieces: list[bytes], batch: int
) -> None:
    # a batch is decoded whole: a bad line in it, CRLF, a lone CR and the other line breaks of
    # Unicode (records split at \n only) must give what reading line by line does
    data = b"".join(pieces)
    folder = tmp_path_factory.mktemp("lines")
    path = folder / "lines.txt"
    path.write_bytes(data)
    out = folder / "out"
    assert tokenize(path, "-o", out, "--tokenizer", exported_mtok(name), "--batch-size", batch, "--shard-size", 4) == 0
    numbers, texts, bad = expected_records(data)
    got_numbers, ids = read_records(out, path.name)
    assert got_numbers == numbers
    assert ids == oracle(texts, name=name)
    listed = [json.loads(line)[0] for f in sorted(out.glob("*.bad.jsonl")) for line in f.read_text().splitlines()]
    assert listed == bad
