"""Coverage-guided fuzzing of the ``.mtok`` readers (atheris), native against pure.

Each input is read by the native reader and by the pure one (``PYMTOK_PURE``, in this process).
The harness fails (and atheris keeps the input as ``crash-*``) when the native core crashes or
either reader raises anything but FormatError, when the two disagree on loading, or when both
load and give different ids.

Half of the mutations are the structured edits of tests/mtok_mutations.py (records that
contradict each other, stored indexes of earlier versions with any content), the rest
libFuzzer's byte-level ones.

    python fuzz/mtok_fuzz.py --seeds DIR        # write the seed files into DIR
    python fuzz/mtok_fuzz.py CORPUS DIR -max_total_time=120    # fuzz (libFuzzer options)
    python fuzz/mtok_fuzz.py --replay FILE...   # run inputs once, e.g. fuzz/regressions/*

Seeds are made at run time: real files from PYMTOK_FIXTURES exported by pymtok, and small
files of our own (which is what fuzz/regressions/ may hold: no fixture bytes in the repository).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

with atheris.instrument_imports(include=["pymtok", "mtok_mutations"]):
    import mtok_mutations as mm

    from pymtok import mtok
    from pymtok.tokenizer import TokenizerMeta

_STRUCTURED = mm.RECORD_MUTATIONS + mm.INDEX_MUTATIONS


def own_configs() -> dict[str, dict]:
    """Small tokenizers of our own making: byte-level and char-level BPE."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    vocab = {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġa": 4, "<s>": 5, "c": 6, "abc": 7, "Ġab": 8}
    merges = [["a", "b"], ["Ġ", "a"], ["ab", "c"], ["Ġa", "b"]]
    added = [{"id": 5, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}]
    chars = {"▁": 0, "a": 1, "b": 2, "▁a": 3, "ab": 4, "▁ab": 5, "é": 6, "日": 7, "本": 8, "日本": 9,
             "<0x41>": 10, "<s>": 11}
    return {
        "byte-level": {"normalizer": None, "pre_tokenizer": byte_level, "decoder": {**byte_level, "add_prefix_space": True},
                       "post_processor": None, "added_tokens": added,
                       "model": {"type": "BPE", "vocab": vocab, "merges": merges}},
        "char-level": {"normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
                       "pre_tokenizer": None, "decoder": None, "post_processor": None,
                       "added_tokens": [{**added[0], "id": 11}],
                       "model": {"type": "BPE", "vocab": chars, "byte_fallback": True,
                                 "merges": [["▁", "a"], ["a", "b"], ["▁a", "b"], ["日", "本"]]}},
    }


def write_seeds(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, config in own_configs().items():
        (out / f"own-{name}.mtok").write_bytes(mtok.dumps_mtok(config, TokenizerMeta()))
    fixtures = os.environ.get("PYMTOK_FIXTURES")
    if not fixtures:
        return
    toys = Path(fixtures) / "mnn-toy"
    for path in sorted(toys.glob("*.mtok")):
        (out / f"mnn-{path.name}").write_bytes(path.read_bytes())  # MNN's own, no extension
        tok = mtok.read_mtok(path)
        (out / f"export-{path.name}").write_bytes(mtok.dumps_mtok(tok.config, tok.meta))


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if rng.random() < 0.5:
        try:
            lay = mm.layout(data)
            edited = bytearray(data)
            rng.choice(_STRUCTURED)(edited, lay, rng)
            return bytes(edited)
        except Exception:  # noqa: BLE001 - the edit does not apply to this input: mutate bytes
            pass
    return bytes(atheris.Mutate(data, max_size))


def check(data: bytes) -> None:
    native, pure = mm.verdict(data, pure=False), mm.verdict(data, pure=True)
    for who, (kind, detail) in (("native", native), ("pure", pure)):
        if kind not in ("ids", "FormatError"):
            raise RuntimeError(f"{who} reader raised {kind}: {detail}")
    if native[0] != pure[0]:
        raise RuntimeError(f"readers disagree: native {native}, pure {pure}")
    if native[0] == "ids" and native[1] != pure[1]:
        raise RuntimeError(f"readers give different ids: native {native[1]}, pure {pure[1]}")


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--seeds"]:
        write_seeds(Path(args[1]))
        return
    if args[:1] == ["--replay"]:
        for name in args[1:]:
            check(Path(name).read_bytes())
        return
    atheris.Setup(sys.argv, check, custom_mutator=mutate)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
