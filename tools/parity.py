"""Full-corpus parity run: every line and paragraph of every corpus file, every fixture model.

    python tools/parity.py [--fixtures DIR] [--corpus DIR] [--via json|mtok] [MODEL ...]

Encodes with pymtok and with HF ``tokenizers`` (with and without special tokens) and decodes HF's
ids with both; prints the match counts per model and exits non-zero on any mismatch.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def chunks(corpus: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(corpus.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        out.extend(line for line in text.split("\n") if line)
        out.extend(p for p in text.split("\n\n") if "\n" in p)
    return out


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--fixtures", type=Path, default=Path(os.environ.get("PYMTOK_FIXTURES", here.parent / "shared" / "fixtures")))
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--via", choices=["json", "mtok"], default="json", help="load tokenizer.json, or export to .mtok and load that")
    args = ap.parse_args()
    corpus = args.corpus or Path(os.environ.get("PYMTOK_CORPUS", args.fixtures.parent / "corpus"))

    import pymtok
    from tokenizers import Tokenizer as HF

    texts = chunks(corpus)
    models = args.models or sorted(p.name for p in (args.fixtures / "tokenizers").iterdir())
    print(f"{len(texts)} chunks ({sum(len(t.encode()) for t in texts) / 1e6:.1f} MB) from {corpus}")
    failed = False
    for name in models:
        folder = args.fixtures / "tokenizers" / name
        hf = HF.from_file(str(folder / "tokenizer.json"))
        hf.no_padding()
        hf.no_truncation()
        if args.via == "mtok":
            out = Path(tempfile.mkdtemp())
            tok = pymtok.load(pymtok.export(folder, out))
        else:
            tok = pymtok.load(folder)
        t0 = time.perf_counter()
        counts = {"plain": 0, "special": 0, "decode": 0}
        first_bad: str | None = None
        for special, key in ((False, "plain"), (True, "special")):
            want = hf.encode_batch(texts, add_special_tokens=special)
            for text, enc in zip(texts, want):
                if tok.encode(text, add_special_tokens=special) == enc.ids:
                    counts[key] += 1
                elif first_bad is None:
                    first_bad = text
                if special:
                    ok = tok.decode(enc.ids, clean_up_tokenization_spaces=False) == hf.decode(enc.ids, skip_special_tokens=False)
                    counts["decode"] += ok
        n = len(texts)
        status = "OK " if all(v == n for v in counts.values()) else "BAD"
        failed |= status == "BAD"
        print(
            f"{status} {name:18s} encode {counts['plain']}/{n}  +special {counts['special']}/{n}  "
            f"decode {counts['decode']}/{n}  ({time.perf_counter() - t0:.0f} s)"
            + (f"  first mismatch: {first_bad[:60]!r}" if first_bad is not None else "")
        )
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
