"""Export a model's tokenizer to MNN's tokenizer file, as MNN's own exporter would.

A folder with ``tokenizer.json`` becomes ``tokenizer.mtok``: MNN's binary layout byte for byte
(``spec/FORMAT.md`` §3–§5, with every lossy mapping MNN's exporter makes), followed by pymtok's
exactness extension so that pymtok reads the file back exactly as HF would tokenize. The header's
special, stop and prefix ids are derived the way MNN's exporter derives them, using pymtok's own
encoder where MNN asks ``transformers``; no ``transformers`` import is needed, so folders MNN
cannot export (``chatglm3-6b``, whose tokenizer class is remote code) export too.

A SentencePiece ``tokenizer.model`` (a folder holding one, or the file) becomes a ``tokenizer.mtok``
whose extension carries sentencepiece's own normalizer, model and decoder: exact, where a
``tokenizer.txt`` would drop the normalizer spec. ``format="txt"`` still writes the ``.txt``, and
:func:`export_report` says what it lost.

>>> export("Qwen3-0.6B/", "out/")                 # doctest: +SKIP
PosixPath('out/tokenizer.mtok')
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import FormatError
from .hf_json import load_folder, serde_literal
from .models import Unigram
from .mtok import dumps_mtok
from .tokenizer import Tokenizer

Progress = Callable[[str, int, int], None]


def export(
    model_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    format: str = "mtok",
    mnn_identical: bool = False,
    progress: Progress | None = None,
) -> Path:
    """Write ``out_dir/tokenizer.mtok`` (or, ``format="txt"``, ``tokenizer.txt``) for a model's tokenizer.

    ``model_dir`` is any source :func:`pymtok.load` reads: a model folder, or a ``tokenizer.json``,
    SentencePiece ``.model``, ``.tiktoken``, BERT ``vocab.txt``, ``vocab.json``, ``.gguf`` file.
    ``format`` is always honoured: ``"txt"`` writes MNN's legacy text format, with a warning
    listing what it loses where it cannot hold the source exactly. ``mnn_identical=True`` writes
    MNN's part of the ``.mtok`` byte for byte as MNN's exporter does; by default it is laid out so
    that MNN's runtime gives HF's ids wherever the file can decide (docs/MNN_DEVICE_LAYOUT.md).
    ``progress(step, done, total)`` is told of each step as it goes (a large vocabulary takes
    seconds to read and to lay out). Returns the path written.
    """
    path, lost = export_report(
        model_dir, out_dir, format=format, mnn_identical=mnn_identical, progress=progress
    )
    if lost:
        warnings.warn(f"{path} is not exact: " + "; ".join(lost), stacklevel=2)
    return path


def export_report(
    model_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    format: str = "mtok",
    mnn_identical: bool = False,
    progress: Progress | None = None,
) -> tuple[Path, list[str]]:
    """:func:`export`, returning the path written and what that file loses of the source (empty
    when pymtok reads it back exactly)."""
    if format not in ("mtok", "txt"):
        raise ValueError(f"format must be 'mtok' or 'txt', got {format!r}")
    source = Path(model_dir)
    if not source.exists():
        raise FileNotFoundError(f"{source}: no such model folder or file")
    target = Path(out_dir)
    sp_model = _sentencepiece_source(source, format)
    if sp_model is None and format == "txt":
        from .legacy import export_txt

        if source.suffix == ".gguf":
            raise FormatError(f"{source}: a GGUF tokenizer has no tokenizer.txt form; export it as mtok")
        path = export_txt(source if source.is_dir() else source.parent, target)
        return path, txt_losses(_read_source(source)[0], path)
    if progress is not None:
        progress("reading the source", 0, 1)
    if sp_model is not None:
        if format == "txt":
            return _sentencepiece_txt(sp_model, target)
        from .sentencepiece import read_model

        tokenizer, table_scores = read_model(sp_model), None
    else:
        tokenizer, table_scores = _read_source(source)
    data = dumps_mtok(
        tokenizer.config, tokenizer.meta, table_scores=table_scores, mnn_identical=mnn_identical,
        progress=progress,
    )
    return _write(target, data), []


_COMPONENTS = ("normalizer", "pre_tokenizer", "post_processor", "decoder")


def txt_losses(tokenizer: Tokenizer, txt: Path) -> list[str]:
    """What the ``tokenizer.txt`` written for ``tokenizer`` does not hold: each part of the
    pipeline that pymtok reads back from the ``.txt`` otherwise, named with both forms (a type-1
    file stores no split pattern, a type-2 file no casing, ...)."""
    from .legacy import read_txt

    back = read_txt(txt)
    lost = []
    for key in _COMPONENTS:
        mine, theirs = tokenizer.to_dict().get(key), back.to_dict().get(key)
        if mine != theirs:
            lost.append(f"{key}: {_brief(mine)} is read back as {_brief(theirs)}")
    options = {k: v for k, v in tokenizer.to_dict()["model"].items() if k not in ("vocab", "merges")}
    back_options = {k: v for k, v in back.to_dict()["model"].items() if k not in ("vocab", "merges")}
    if options != back_options:
        lost.append(f"model options: {_brief(options)} are read back as {_brief(back_options)}")
    if back.get_vocab() != tokenizer.get_vocab():
        lost.append("vocabulary: tokens or ids differ when read back")
    return lost


def _brief(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


def _read_source(source: Path) -> tuple[Tokenizer, list[float] | None]:
    """The tokenizer of ``source`` and, for a Unigram ``tokenizer.json``, the scores MNN's table
    holds: Python's reading of each score, where ours is the one HF's parser makes."""
    json_file = source / "tokenizer.json" if source.is_dir() else source
    if json_file.name == "tokenizer.json" and json_file.is_file():
        tokenizer = load_folder(json_file)
        table_scores = None
        if isinstance(tokenizer.model, Unigram):
            raw = json.loads(json_file.read_bytes())
            table_scores = [entry[1] for entry in raw["model"]["vocab"]]
        return tokenizer, table_scores
    from . import load

    return load(source), None


def _sentencepiece_source(source: Path, format: str) -> Path | None:
    """The SentencePiece model to export: the ``.model`` file given, or a folder's
    ``tokenizer.model`` (``ice_text.model``) unless a ``.mtok`` is made from its ``tokenizer.json``."""
    if source.is_file() and source.suffix == ".model":
        return source
    if not source.is_dir() or (format == "mtok" and (source / "tokenizer.json").is_file()):
        return None
    return next((source / n for n in ("tokenizer.model", "ice_text.model") if (source / n).is_file()), None)


def _sentencepiece_txt(model: Path, target: Path) -> tuple[Path, list[str]]:
    from .legacy import from_sentencepiece, sentencepiece_txt_losses
    from .sentencepiece import read_model

    tokenizer = read_model(model)
    post = tokenizer.config.get("post_processor") or {"single": []}
    add_eos = bool(post["single"]) and "SpecialToken" in post["single"][-1]
    legacy = from_sentencepiece(model, add_bos=bool(tokenizer.meta.prefix_ids))
    target.mkdir(parents=True, exist_ok=True)
    return legacy.write(target / "tokenizer.txt"), sentencepiece_txt_losses(model, add_eos=add_eos)


def _write(target: Path, data: bytes) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    out = target / "tokenizer.mtok"
    out.write_bytes(data)
    return out


# ------------------------------------------------------------------------------------------
# Back to HF: tokenizer.json and tokenizer_config.json
# ------------------------------------------------------------------------------------------


def tokenizer_json(tokenizer: Tokenizer) -> str:
    """``tokenizer.json`` text for ``tokenizer``'s pipeline: its config with every table in
    plain JSON (a ``.mtok``'s vocabulary and merges read out of the file), which HF
    ``tokenizers`` builds into the same pipeline."""
    config = tokenizer.to_dict()
    doc = {
        "version": "1.0",
        "truncation": config.get("truncation"),
        "padding": config.get("padding"),
        "added_tokens": config.get("added_tokens") or [],
        **{key: config.get(key) for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder")},
    }
    head = json.dumps(doc, ensure_ascii=False, indent=2)
    return head[: -len("\n}")] + ',\n  "model": ' + _model_json(config["model"]) + "\n}"


def _model_json(model: dict[str, Any]) -> str:
    """The model section; a Unigram's scores written as numbers HF's parser reads back exactly
    (Viterbi compares path sums, so one ulp decides a tie)."""
    if model.get("type") != "Unigram":
        return json.dumps(model, ensure_ascii=False)
    entries, inexact = [], 0
    for piece, score in model["vocab"]:
        literal = serde_literal(score)
        if literal is None:
            inexact += 1
            literal = repr(score)
        entries.append(f"[{json.dumps(piece, ensure_ascii=False)}, {literal}]")
    if inexact:
        warnings.warn(f"{inexact} Unigram scores have no JSON number HF's parser reads exactly: HF reads "
                      "them one ulp off, which can break a tie between segmentations otherwise", stacklevel=4)
    rest = json.dumps({k: v for k, v in model.items() if k != "vocab"}, ensure_ascii=False)
    return rest[:-1] + (", " if len(rest) > 2 else "") + '"vocab": [' + ", ".join(entries) + "]}"


def tokenizer_config(tokenizer: Tokenizer) -> dict[str, Any]:
    """``tokenizer_config.json`` for ``tokenizer``: what transformers needs beside the pipeline
    to give the same prompts and decoded text (its class reads ``tokenizer.json`` as it is)."""
    meta = tokenizer.meta
    # CLIP's decode turns the end-of-word suffix into spaces in transformers' class only
    klass = "CLIPTokenizer" if meta.decode_suffix_as_space else "PreTrainedTokenizerFast"
    out: dict[str, Any] = {"tokenizer_class": klass}
    for key, text in meta.special_tokens.items():
        if key.endswith("_token"):
            out[key] = text
    if meta.extra_special_tokens:
        out["extra_special_tokens"] = list(meta.extra_special_tokens)
    out["clean_up_tokenization_spaces"] = meta.clean_up_tokenization_spaces
    settings = meta.call_settings
    if type(settings.get("model_max_length")) is int:
        out["model_max_length"] = settings["model_max_length"]
    # the class written above declares transformers' base defaults, not the original class's
    for key in ("padding_side", "truncation_side", "model_input_names", "chat_control_tokens"):
        if key in settings:
            out[key] = settings[key]
    if meta.split_special_tokens:
        out["split_special_tokens"] = True
    template = meta.chat_template
    if isinstance(template, str):
        out["chat_template"] = template
    elif isinstance(template, dict):
        out["chat_template"] = [{"name": name, "template": text} for name, text in template.items()]
    return out


def save_pretrained(tokenizer: Tokenizer, directory: Path) -> tuple[Path, Path]:
    """Write ``directory/tokenizer.json`` and ``directory/tokenizer_config.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    main = directory / "tokenizer.json"
    main.write_text(tokenizer_json(tokenizer), encoding="utf-8")
    side = directory / "tokenizer_config.json"
    side.write_text(json.dumps(tokenizer_config(tokenizer), ensure_ascii=False, indent=2), encoding="utf-8")
    return main, side
