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
from collections.abc import Callable
from pathlib import Path

from .hf_json import load_folder
from .models import Unigram
from .mtok import dumps_mtok


def export(
    model_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    format: str = "mtok",
    index: bool = True,
    mnn_identical: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> Path:
    """Write ``out_dir/tokenizer.mtok`` (or ``tokenizer.txt``) for the model in ``model_dir``.

    ``format="txt"``, or a folder without ``tokenizer.json``, writes MNN's legacy text format.
    ``index=False`` leaves the stored BPE index out of a ``.mtok`` (see ``mtok.dumps_mtok``).
    ``mnn_identical=True`` writes MNN's part of the ``.mtok`` byte for byte as MNN's exporter
    does; by default it is laid out so that MNN's runtime gives HF's ids wherever the file can
    decide (docs/FORMAT_EXTENSION.md).
    ``progress(step, done, total)`` is told of each step as it goes (a large vocabulary takes
    seconds to read and to lay out). Returns the path written.
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
    if progress is not None:
        progress("reading tokenizer.json", 0, 1)
    tokenizer = load_folder(source)
    table_scores = None
    if isinstance(tokenizer.model, Unigram):
        # MNN's table holds Python's reading of each score, ours the one HF's parser makes
        raw = json.loads((source / "tokenizer.json").read_bytes())
        table_scores = [entry[1] for entry in raw["model"]["vocab"]]
    target.mkdir(parents=True, exist_ok=True)
    out = target / "tokenizer.mtok"
    out.write_bytes(
        dumps_mtok(
            tokenizer.config, tokenizer.meta, table_scores=table_scores, index=index, mnn_identical=mnn_identical,
            progress=progress,
        )
    )
    return out
