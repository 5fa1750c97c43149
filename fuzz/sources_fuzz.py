"""Coverage-guided fuzzing of the source readers (atheris): SentencePiece ``.model``, ``.gguf``
and ``.tiktoken``, as ``fuzz/mtok_fuzz.py`` fuzzes the ``.mtok`` readers.

An input's first byte picks the reader, the rest is the file. The harness fails (and atheris
keeps the input as ``crash-*``) when a reader raises anything but FormatError, or when a file it
accepts cannot encode and decode a few texts on both paths with the same ids.

    python fuzz/sources_fuzz.py --seeds DIR        # write the seed files into DIR
    python fuzz/sources_fuzz.py CORPUS DIR -max_total_time=60    # fuzz (libFuzzer options)

Seeds are made at run time from PYMTOK_FIXTURES (the repository holds no fixture bytes).
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["pymtok"]):
    import pymtok

SUFFIXES = (".model", ".gguf", ".tiktoken")
TEXTS = ["Hello world, 12345!", "  two  spaces\n", "日本語 café ▁ <s> \x00"]
_DIR = tempfile.mkdtemp(prefix="pymtok-fuzz-")


def write_seeds(out: Path) -> None:
    fixtures = Path(os.environ["PYMTOK_FIXTURES"])
    out.mkdir(parents=True, exist_ok=True)
    seeds = {
        0: [fixtures / "legacy/sentencepiece/test_model.model", fixtures / "legacy/sentencepiece/botchan_en_bpe_1000.model"],
        1: [fixtures / "gguf/ggml-vocab-llama-spm.gguf", fixtures / "gguf/ggml-vocab-bert-bge.gguf"],
    }
    for kind, paths in seeds.items():
        for path in paths:
            (out / f"{kind}-{path.name}").write_bytes(bytes([kind]) + path.read_bytes())
    # the first ranks of cl100k: an unknown vocabulary, read with the assumption it warns of
    head = b"\n".join((fixtures / "legacy/tiktoken/cl100k_base.tiktoken").read_bytes().splitlines()[:3000])
    (out / "2-cl100k-head.tiktoken").write_bytes(b"\x02" + head + b"\n")


def _ids(tok: pymtok.Tokenizer) -> list[list[int]]:
    return [tok.encode(text) for text in TEXTS]


def test_one(data: bytes) -> None:
    if len(data) < 2:
        return
    path = Path(_DIR) / f"input{SUFFIXES[data[0] % len(SUFFIXES)]}"
    path.write_bytes(data[1:])
    results = []
    for pure in ("0", "1"):
        os.environ["PYMTOK_PURE"] = pure  # read at every load
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tok = pymtok.load(path)
            results.append(_ids(tok))
            for ids in results[-1]:
                tok.decode(ids)
        except pymtok.FormatError:
            results.append(None)
    if results[0] != results[1]:
        raise AssertionError(f"the native and the pure path disagree: {results}")


def main() -> None:
    if sys.argv[1:2] == ["--seeds"]:
        write_seeds(Path(sys.argv[2]))
        return
    atheris.Setup(sys.argv, test_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
