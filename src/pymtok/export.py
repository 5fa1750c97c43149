"""Export a model's tokenizer to MNN's tokenizer file, as MNN's own exporter would.

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

from .errors import FormatError
from .hf_json import load_folder
from .models import Unigram
from .mtok import dumps_mtok


def export(
    model_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, format: str = "mtok", index: bool = True
) -> Path:
    """Write ``out_dir/tokenizer.mtok`` (or ``tokenizer.txt``) for a model's tokenizer.

    ``model_dir`` is any source :func:`pymtok.load` reads: a model folder, or a ``tokenizer.json``,
    ``.tiktoken``, BERT ``vocab.txt``, ``vocab.json``, ``.gguf`` file. ``format`` is always
    honoured: ``"txt"`` writes MNN's legacy text format from the folder's files, as MNN's exporter
    chooses them. ``index=False`` leaves the stored BPE index out of a ``.mtok`` (see
    ``mtok.dumps_mtok``). Returns the path written.
    """
    if format not in ("mtok", "txt"):
        raise ValueError(f"format must be 'mtok' or 'txt', got {format!r}")
    source = Path(model_dir)
    if not source.exists():
        raise FileNotFoundError(f"{source}: no such model folder or file")
    target = Path(out_dir)
    if format == "txt":
        from .legacy import export_txt

        if source.suffix == ".gguf":
            raise FormatError(f"{source}: a GGUF tokenizer has no tokenizer.txt form; export it as mtok")
        return export_txt(source if source.is_dir() else source.parent, target)
    json_file = source / "tokenizer.json" if source.is_dir() else source
    if json_file.name == "tokenizer.json" and json_file.is_file():
        tokenizer = load_folder(json_file)
        table_scores = None
        if isinstance(tokenizer.model, Unigram):
            # MNN's table holds Python's reading of each score, ours the one HF's parser makes
            raw = json.loads(json_file.read_bytes())
            table_scores = [entry[1] for entry in raw["model"]["vocab"]]
        data = dumps_mtok(tokenizer.config, tokenizer.meta, table_scores=table_scores, index=index)
    else:
        from . import load

        tokenizer = load(source)
        data = dumps_mtok(tokenizer.config, tokenizer.meta, index=index)
    target.mkdir(parents=True, exist_ok=True)
    out = target / "tokenizer.mtok"
    out.write_bytes(data)
    return out
