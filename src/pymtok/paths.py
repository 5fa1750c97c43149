"""What every reader checks before it opens a tokenizer file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import FormatError

_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def regular_file(path: str | os.PathLike[str]) -> Path:
    """``path``, refused at once unless it is a regular file (or a link to one).

    A FIFO would block the reader's open forever and a device would never end, so anything else
    raises FormatError saying what it is; a missing path raises FileNotFoundError.
    """
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such tokenizer file") from None
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise FormatError(f"{p}: is {kind}, not a tokenizer file")
    return p
