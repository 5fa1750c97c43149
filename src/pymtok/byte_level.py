"""GPT-2's reversible byte <-> printable-character map, shared by every byte-level component."""

from __future__ import annotations

# Pieces up to this many characters have their mapping remembered: words recur, long runs rarely
# do. Past the entry limit the memo starts afresh, so a stream of new words cannot grow it unbounded.
_MEMO_MAX_PIECE = 64
_MEMO_MAX_ENTRIES = 1 << 16


def _bytes_to_unicode() -> dict[int, str]:
    # Printable bytes keep their own code point; the other 68 are moved, in byte order, to
    # U+0100 onwards so that every byte has a visible, whitespace-free stand-in.
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table: dict[int, str] = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


BYTE_TO_CHAR: dict[int, str] = _bytes_to_unicode()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_CHAR.items()}
# str.translate table: each byte value (as a latin-1 code point) to its stand-in character.
_LATIN1_TO_CHARS = {b: c for b, c in BYTE_TO_CHAR.items()}


def bytes_to_chars(data: bytes) -> str:
    """Map raw bytes to their GPT-2 stand-in characters."""
    return data.decode("latin-1").translate(_LATIN1_TO_CHARS)


def text_to_chars(text: str) -> str:
    """Map the UTF-8 bytes of ``text`` to GPT-2 stand-in characters."""
    return bytes_to_chars(text.encode("utf-8"))


class _PieceChars(dict[str, str]):
    """``text_to_chars`` of pre-tokenized pieces as ``PIECE_CHARS[piece]``: once a piece has
    been seen, a plain dict lookup, with no Python function call."""

    def __missing__(self, piece: str) -> str:
        chars = text_to_chars(piece)
        if len(piece) <= _MEMO_MAX_PIECE:
            if len(self) >= _MEMO_MAX_ENTRIES:
                self.clear()
            self[piece] = chars
        return chars


PIECE_CHARS = _PieceChars()


def byte_token(b: int) -> str:
    """The SentencePiece-style byte-fallback token for byte ``b`` (``<0x0A>``)."""
    return f"<0x{b:02X}>"
