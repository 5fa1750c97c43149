"""pymtok: MNN's LLM tokenizer files (.mtok and tokenizer.txt) in Python, exact against HF.

>>> import pymtok
>>> tok = pymtok.load("Qwen3-0.6B/")                  # doctest: +SKIP
>>> tok.encode("Hello world")                          # doctest: +SKIP
[9707, 1879]
>>> tok.decode([9707, 1879])                           # doctest: +SKIP
'Hello world'
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import FormatError, PymtokError, TemplateError
from .export import export
from .tokenizer import DecodeStream, Tokenizer, TokenizerMeta

__version__ = "0.1.0"

__all__ = [
    "DecodeStream", "FormatError", "PymtokError", "TemplateError", "Tokenizer", "TokenizerMeta",
    "__version__", "export", "load",
]


def load(path: str | os.PathLike[str]) -> Tokenizer:
    """Load a tokenizer from ``tokenizer.json``, ``tokenizer.mtok``, ``tokenizer.txt`` or a folder.

    A folder is searched for ``tokenizer.json``, then ``tokenizer.mtok``, then ``tokenizer.txt``.
    """
    p = Path(path)
    if p.is_dir():
        for name in ("tokenizer.json", "tokenizer.mtok", "tokenizer.txt"):
            if (p / name).is_file():
                p = p / name
                break
        else:
            raise FormatError(f"{p}: no tokenizer.json, tokenizer.mtok or tokenizer.txt in this folder")
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such tokenizer file")
    with open(p, "rb") as f:
        head = f.read(16)
    if head.startswith(b"430 4"):
        from .mtok import read_mtok

        tok = read_mtok(p)
    elif head.startswith(b"430 "):
        from .legacy import read_txt

        tok = read_txt(p)
    elif p.suffix in (".mtok", ".txt"):
        raise FormatError(
            f"{p}: header at byte 0: not an MNN tokenizer file (it starts {head[:8]!r}, expected '430 <type>')"
        )
    else:
        from .hf_json import load_folder

        tok = load_folder(p)
    _apply_llm_config(tok, p.parent / "llm_config.json")
    return tok


def _apply_llm_config(tok: Tokenizer, path: Path) -> None:
    """MNN deployments override the template and EOS text from ``llm_config.json``'s jinja block."""
    from .hf_json import template_from_llm_config

    override = template_from_llm_config(path)
    if override is not None:
        tok.set_chat_template(*override)
