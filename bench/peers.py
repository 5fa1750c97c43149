"""How each library the benchmark compares loads a model and encodes, batches and decodes.

Every loader takes the model's fixture folder (its ``tokenizer.json``, and for some libraries a
file of their own format built from it) and returns a :class:`Library`. A library that cannot load
a model raises; the driver reports it as "fails to load" with the message, never as a speed.

Every ``encode`` is the library's equivalent of HF's ``encode(text, add_special_tokens=False)``:
added tokens written in the text still match where the library matches them, no BOS/EOS is added.
Ids are returned as the library returns them (a list or an array): converting them to a Python
list costs what the library's own user pays, so the timed calls return what the library returns,
and the driver converts only to compare.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

Ids = Sequence[int]


@dataclass
class Library:
    encode: Callable[[str], Ids]
    # every batch call is asked for 2 threads, through the library's own knob or RAYON_NUM_THREADS
    batch: Callable[[list[str]], Sequence[Ids]] | None = None
    decode: Callable[[list[int]], str] | None = None
    # the text of ``ids`` fed one id at a time, as a generation loop would
    stream: Callable[[list[int]], str] | None = None
    # an encode that also returns each token's offsets
    offsets: Callable[[str], Any] | None = None
    # an encode of the same ids through the library's plain single-call entry (pymtok: ``tok(...)``
    # without offsets, to compare against ``offsets`` on equal terms)
    call: Callable[[str], Any] | None = None
    # pymtok: whether the native core runs this tokenizer (None for the other libraries)
    native: bool | None = None
    # pymtok: ``encode``'s ids as a numpy array (``encode_to_numpy``), the form ``array`` peers return
    encode_array: Callable[[str], Ids] | None = None
    # whether ``encode`` returns a numpy array rather than a list (gigatoken)
    array: bool = False


# the package each library is installed as, for the versions printed at the top of a run
DISTRIBUTIONS = {
    "pymtok": "pymtok", "pymtok-mtok": "pymtok", "pymtok-pure": "pymtok", "hf": "tokenizers",
    "tiktoken": "tiktoken", "sentencepiece": "sentencepiece", "fastokens": "fastokens",
    "gigatoken": "gigatoken", "tuetoken": "tuetoken", "quicktok": "quicktok-v1", "splintr": "splintr-rs",
    "tokie": "tokie",
}


def version(library: str) -> str | None:
    try:
        return importlib.metadata.version(DISTRIBUTIONS[library])
    except importlib.metadata.PackageNotFoundError:
        return None


def tokenizer_json(model_dir: Path) -> Path:
    return model_dir / "tokenizer.json"


def _pymtok(path: Path) -> Library:
    import pymtok

    tok = pymtok.load(path)

    def stream(ids: list[int]) -> str:
        step = tok.decode_stream().step
        return "".join(filter(None, map(step, ids)))

    return Library(
        encode=lambda t: tok.encode(t, add_special_tokens=False),
        batch=lambda ts: tok.encode_batch(ts, add_special_tokens=False, num_threads=2),
        # without transformers' text fix-ups: HF tokenizers' decode, the one the peers give
        decode=lambda ids: tok.decode(ids, clean_up_tokenization_spaces=False),
        stream=stream,
        offsets=lambda t: tok(t, add_special_tokens=False, return_offsets_mapping=True),
        call=lambda t: tok(t, add_special_tokens=False),
        native=tok._native_segment is not None,
        encode_array=lambda t: tok.encode_to_numpy(t, add_special_tokens=False),
    )


def load_pymtok(model_dir: Path, mtok_dir: Path) -> Library:
    return _pymtok(tokenizer_json(model_dir))


def load_pymtok_mtok(model_dir: Path, mtok_dir: Path) -> Library:
    path = mtok_dir / model_dir.name / "tokenizer.mtok"
    if not path.is_file():
        raise FileNotFoundError(f"no .mtok exported for {model_dir.name}")
    return _pymtok(path)


def load_hf(model_dir: Path, mtok_dir: Path) -> Library:
    from tokenizers import Tokenizer
    from tokenizers.decoders import DecodeStream

    tok = Tokenizer.from_file(str(tokenizer_json(model_dir)))
    tok.no_padding()
    tok.no_truncation()

    def stream(ids: list[int]) -> str:
        decoder = DecodeStream(skip_special_tokens=False)
        return "".join(filter(None, (decoder.step(tok, i) for i in ids)))

    return Library(
        encode=lambda t: tok.encode(t, add_special_tokens=False).ids,
        # HF's batch runs on its rayon pool: the driver sets RAYON_NUM_THREADS=2
        batch=lambda ts: [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)],
        decode=lambda ids: tok.decode(ids, skip_special_tokens=False),
        stream=stream,
        offsets=lambda t: tok.encode(t, add_special_tokens=False).offsets,
    )


def _byte_level_vocab(model_dir: Path) -> tuple[dict[bytes, int], str]:
    """The HF file's byte-level vocabulary as bytes -> id, and its one split pattern; raises for a
    file that is not a single-pattern byte-level BPE (tiktoken could not encode it exactly)."""
    config = json.loads(tokenizer_json(model_dir).read_text(encoding="utf-8"))
    sys.path.insert(0, str(ROOT / "src"))
    from pymtok.byte_level import CHAR_TO_BYTE

    model = config["model"]
    # an NFC normalizer (qwen3) tiktoken cannot apply: such a model loads, and the documents
    # whose ids it changes are reported as differing
    normalizer = config.get("normalizer") or {"type": "NFC"}
    if model.get("type") != "BPE" or normalizer.get("type") != "NFC" or model.get("byte_fallback"):
        raise ValueError("not a byte-level BPE without normalizer")
    pre = config.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre])
    splits = [p["pattern"]["Regex"] for p in steps if p.get("type") == "Split" and "Regex" in p.get("pattern", {})]
    if len(splits) != 1 or not all(p.get("type") in ("Split", "ByteLevel") for p in steps):
        raise ValueError(f"pre-tokenizer is not one Split and ByteLevel: {[p.get('type') for p in steps]}")
    ranks = {bytes(CHAR_TO_BYTE[c] for c in token): id for token, id in model["vocab"].items()}
    return ranks, splits[0]


def load_tiktoken(model_dir: Path, mtok_dir: Path) -> Library:
    import tiktoken

    ranks, pattern = _byte_level_vocab(model_dir)
    enc = tiktoken.Encoding("bench", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return Library(
        encode=enc.encode_ordinary,
        batch=lambda ts: enc.encode_ordinary_batch(ts, num_threads=2),
        decode=enc.decode,
    )


SPM_MODEL = {"mistral-7b-v0.1": "legacy/sentencepiece/mistral-7b-v0.1.model"}


def load_sentencepiece(model_dir: Path, mtok_dir: Path) -> Library:
    import sentencepiece

    relative = SPM_MODEL.get(model_dir.name)
    if relative is None:
        raise FileNotFoundError("no sentencepiece .model among the fixtures for this model")
    sp = sentencepiece.SentencePieceProcessor(model_file=str(model_dir.parent.parent / relative))
    return Library(encode=sp.encode, batch=lambda ts: sp.encode(ts, num_threads=2), decode=sp.decode)


def load_fastokens(model_dir: Path, mtok_dir: Path) -> Library:
    import fastokens

    tok = fastokens.Tokenizer.from_file(str(tokenizer_json(model_dir)))
    return Library(
        encode=lambda t: tok.encode(t, add_special_tokens=False).ids,
        batch=lambda ts: [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)],
        decode=lambda ids: tok.decode(ids, skip_special_tokens=False),
    )


def load_gigatoken(model_dir: Path, mtok_dir: Path) -> Library:
    import gigatoken

    tok = gigatoken.Tokenizer(str(tokenizer_json(model_dir)))
    return Library(
        encode=tok.encode,
        batch=lambda ts: tok.encode_batch_list(ts, parallel=True),
        decode=lambda ids: tok.decode(ids).decode("utf-8", "replace"),
        array=True,
    )


def load_tuetoken(model_dir: Path, mtok_dir: Path) -> Library:
    import tuetoken

    tok = tuetoken.Tokenizer(str(tokenizer_json(model_dir)))
    return Library(
        encode=tok.encode_ordinary,
        batch=lambda ts: tok.encode_ordinary_batch(ts, num_threads=2),
        decode=tok.decode,
        offsets=tok.encode_with_offsets,
    )


def load_quicktok(model_dir: Path, mtok_dir: Path) -> Library:
    """quicktok encodes from its own files, which its importer writes from the tokenizer.json
    after checking them against HF on its own stress texts (it refuses split patterns it has
    no hand-written scanner for)."""
    import contextlib
    import io

    import quicktok

    data_dir = mtok_dir / "quicktok" / model_dir.name
    data_dir.mkdir(parents=True, exist_ok=True)
    name = "bench_" + model_dir.name.replace("-", "_").replace(".", "_")
    # imported once per run (the driver empties the folder at its start), not in every process
    if not (data_dir / f"{name}.enc").is_file():
        with contextlib.redirect_stdout(io.StringIO()):
            quicktok.import_tokenizer(str(tokenizer_json(model_dir)), name, data_dir=str(data_dir))
    tok = quicktok.Tokenizer(name, str(data_dir))

    def batch(texts: list[str]) -> list[Ids]:
        flat, offsets = tok.encode_batch(texts, 2, False)
        return [flat[offsets[i] : offsets[i + 1]] for i in range(len(texts))]

    return Library(encode=tok.encode_ordinary, batch=batch, decode=tok.decode)


def load_splintr(model_dir: Path, mtok_dir: Path) -> Library:
    import splintr

    tok = splintr.from_json(str(tokenizer_json(model_dir)))

    def stream(ids: list[int]) -> str:
        decoder = tok.streaming_decoder()
        return "".join(filter(None, map(decoder.add_token, ids))) + decoder.flush()

    # encode_raw: without the template's BOS/EOS, which encode and encode_batch add (so its batch
    # ids differ from HF's on the models with a template)
    return Library(
        encode=tok.encode_raw,
        batch=tok.encode_batch,
        decode=tok.decode,
        stream=stream if hasattr(tok, "streaming_decoder") else None,
    )


def load_tokie(model_dir: Path, mtok_dir: Path) -> Library:
    import tokie

    tok = tokie.Tokenizer.from_json(str(tokenizer_json(model_dir)))

    def decode(ids: list[int]) -> str:
        # None where tokie finds no text: counted as differing from HF's, which decodes every id
        text = tok.decode(ids)
        return "" if text is None else text

    return Library(
        encode=lambda t: tok.encode(t, add_special_tokens=False).ids,
        batch=lambda ts: [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)],
        decode=decode,
        offsets=lambda t: tok.encode_with_offsets(t, add_special_tokens=False),
    )


LOADERS: dict[str, Callable[[Path, Path], Library]] = {
    "pymtok": load_pymtok,
    "pymtok-mtok": load_pymtok_mtok,
    "pymtok-pure": load_pymtok,
    "hf": load_hf,
    "tiktoken": load_tiktoken,
    "sentencepiece": load_sentencepiece,
    "fastokens": load_fastokens,
    "gigatoken": load_gigatoken,
    "tuetoken": load_tuetoken,
    "quicktok": load_quicktok,
    "splintr": load_splintr,
    "tokie": load_tokie,
}
PYMTOK = ("pymtok", "pymtok-mtok", "pymtok-pure")
PEERS = tuple(lib for lib in LOADERS if lib not in PYMTOK and lib != "hf")


def as_list(ids: Iterable[int]) -> list[int]:
    return ids.tolist() if hasattr(ids, "tolist") else list(ids)


def environment(library: str) -> dict[str, str]:
    """The environment a worker process of ``library`` runs in."""
    env = dict(os.environ, RAYON_NUM_THREADS="2", TOKENIZERS_PARALLELISM="true")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    if library == "pymtok-pure":
        env["PYMTOK_PURE"] = "1"
    else:
        env.pop("PYMTOK_PURE", None)
    return env
