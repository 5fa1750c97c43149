"""Export a HuggingFace model folder to MNN's tokenizer file, as MNN's own exporter would.

A folder with ``tokenizer.json`` becomes ``tokenizer.mtok``: MNN's binary layout byte for byte
(``spec/FORMAT.md`` §3–§5, with every lossy mapping MNN's exporter makes), followed by pymtok's
exactness extension so that pymtok reads the file back exactly as HF would tokenize. The header's
special, stop and prefix ids are derived the way MNN's exporter derives them, using pymtok's own
encoder where MNN asks ``transformers``; no ``transformers`` import is needed, so folders MNN
cannot export (``chatglm3-6b``, whose tokenizer class is remote code) export too.

>>> export("Qwen3-0.6B/", "out/")                 # doctest: +SKIP
PosixPath('out/tokenizer.mtok')
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .hf_json import load_folder
from .models import Unigram
from .mtok import dumps_mtok
from .tokenizer import Tokenizer


def export(
    model_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, format: str = "mtok", index: bool = True
) -> Path:
    """Write ``out_dir/tokenizer.mtok`` (or ``tokenizer.txt``) for the model in ``model_dir``.

    ``format="txt"``, or a folder without ``tokenizer.json``, writes MNN's legacy text format.
    ``index=False`` leaves the stored BPE index out of a ``.mtok`` (see ``mtok.dumps_mtok``).
    Returns the path written.
    """
    if format not in ("mtok", "txt"):
        raise ValueError(f"format must be 'mtok' or 'txt', got {format!r}")
    source = Path(model_dir)
    if not source.is_dir():
        raise FileNotFoundError(f"{source}: no such model folder")
    target = Path(out_dir)
    if format == "txt" or not (source / "tokenizer.json").is_file():
        from .legacy import export_txt

        return export_txt(source, target)
    tokenizer = load_folder(source)
    table_scores = None
    if isinstance(tokenizer.model, Unigram):
        # MNN's table holds Python's reading of each score, ours the one HF's parser makes
        raw = json.loads((source / "tokenizer.json").read_bytes())
        table_scores = [entry[1] for entry in raw["model"]["vocab"]]
    target.mkdir(parents=True, exist_ok=True)
    out = target / "tokenizer.mtok"
    out.write_bytes(dumps_mtok(tokenizer.config, tokenizer.meta, table_scores=table_scores, index=index))
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
        "model": config["model"],
    }
    return json.dumps(doc, ensure_ascii=False, indent=2)


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
    if meta.model_max_length is not None:
        out["model_max_length"] = meta.model_max_length
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
