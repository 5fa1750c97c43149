"""A loaded tokenizer keeps working, and keeps its ids, whatever happens to its file afterwards.

HF ``tokenizers`` and ``tiktoken`` hold their data in memory; so does pymtok: truncating the
file (``truncate``, or ``cp new.mtok old.mtok``, which truncates the same inode and writes it
anew), overwriting part of it with zeros, or replacing it must not change a loaded tokenizer.
Each case runs in a child process, so that a SIGBUS or SIGSEGV fails the test instead of
killing the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fixture_path

import pymtok
from pymtok.mtok import write_mtok

TEXTS = ["Hello world, qz!", "naïve café 日本語 ▁x\n\tend", "The quick brown fox " * 20]

CHILD = """
import os, shutil, sys
from pymtok.mtok import read_mtok
path, other, change = sys.argv[1:4]
texts = sys.argv[4:]
tok = read_mtok(path)
before = ([tok.encode(t) for t in texts], [tok.decode(tok.encode(t)) for t in texts], tok.get_vocab())
if change == "truncate":
    os.truncate(path, 0)
elif change == "truncate half":
    os.truncate(path, os.path.getsize(path) // 2)
elif change == "cp other onto it":
    shutil.copyfile(other, path)  # what `cp new old` does: the same inode truncated and rewritten
elif change == "zeros over a third":
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 3)
        f.write(bytes(size // 3))
elif change == "replace":
    os.replace(other, path)
elif change == "delete":
    os.remove(path)
else:
    raise SystemExit("unknown change " + change)
after = ([tok.encode(t) for t in texts], [tok.decode(tok.encode(t)) for t in texts], tok.get_vocab())
assert after == before, change
print("ok")
"""

CHANGES = ["truncate", "truncate half", "cp other onto it", "zeros over a third", "replace", "delete"]


# a session's: the tests of each model run with that model's group (conftest.py), between other modules'
@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Real files as pymtok exports them: a char-level BPE, a WordPiece
    model, and a Unigram one to copy over them."""
    out = {}
    for name in ("mistral-7b-v0.1", "all-minilm-l6-v2", "t5-small"):
        path = tmp_path_factory.mktemp("export") / f"{name}.mtok"
        write_mtok(pymtok.load(fixture_path("tokenizers", name, "tokenizer.json")), path)
        out[name] = path.read_bytes()
    return out


def cases() -> list[object]:
    """(name, change, reader): every change on both readers in the fast tier, the two models
    taking turns (each case is a child process's start-up); all four in the full tier."""
    out: list[object] = []
    for i, change in enumerate(CHANGES):
        for j, reader in enumerate(["native", "pure"]):
            for k, name in enumerate(["mistral-7b-v0.1", "all-minilm-l6-v2"]):
                marks = [pytest.mark.slow] if (i + j + k) % 2 else []
                out.append(pytest.param(name, change, reader, marks=marks))
    return out


@pytest.mark.parametrize(("name", "change", "reader"), cases())
def test_loaded_mtok_survives_its_file_changing(
    tmp_path: Path, exported: dict[str, bytes], name: str, change: str, reader: str
) -> None:
    if reader == "native":
        pytest.importorskip("pymtok._native")
    path, other = tmp_path / "tokenizer.mtok", tmp_path / "other.mtok"
    path.write_bytes(exported[name])
    other.write_bytes(exported["t5-small"])
    env = {**os.environ, "PYMTOK_PURE": "1" if reader == "pure" else "0"}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(other), change, *TEXTS], capture_output=True, timeout=300, env=env
    )
    assert proc.returncode == 0 and proc.stdout.strip() == b"ok", (
        f"exit {proc.returncode}: " + proc.stderr.decode(errors="replace")[-2000:]
    )
