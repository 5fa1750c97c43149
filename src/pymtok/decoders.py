"""Decoders: turn the token strings of decoded ids back into text, exactly as HF ``tokenizers``.

Each decoder is HF's ``decode_chain``: it takes the token list and returns an edited list, and
the caller joins the result with ``""``.

>>> chain = from_config({"type": "Sequence", "decoders": [
...     {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
...     {"type": "ByteFallback"}, {"type": "Fuse"}]})
>>> "".join(chain(["\u2581Hi", "<0x21>", "<0xE3>", "<0x81>", "<0x82>"]))
' Hi!あ'
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol

import regex

from . import normalizers
from .backtracking import timeout_for, too_slow
from .byte_level import CHAR_TO_BYTE
from .components import build_component
from .errors import FormatError
from .onig import onig_regex, onig_sub

__all__ = [
    "BPEDecoder", "ByteFallback", "ByteLevel", "CTC", "Decoder", "Fuse", "Metaspace", "Replace",
    "SentencePiece", "Sequence", "Strip", "WordPiece", "clean_up_tokenization", "from_config",
]

REPLACEMENT_CHARACTER = "\ufffd"


class Decoder(Protocol):
    def __call__(self, tokens: list[str]) -> list[str]: ...


# transformers' ``clean_up_tokenization`` replacements, in order
_TRANSFORMERS_CLEANUP = (
    (" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
    (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"),
)
# HF's own list (its WordPiece and CTC decoders) is transformers' with " do not" also rewritten,
# in the middle of the chain (after " 'm")
_HF_CLEANUP = (*_TRANSFORMERS_CLEANUP[:7], (" do not", " don't"), *_TRANSFORMERS_CLEANUP[7:])


def _replace_in_order(text: str, replacements: tuple[tuple[str, str], ...]) -> str:
    for old, new in replacements:
        text = text.replace(old, new)
    return text


def clean_up_tokenization(text: str) -> str:
    """transformers' ``clean_up_tokenization`` (applied when ``clean_up_tokenization_spaces``).

    >>> clean_up_tokenization("I do n't know , really .")
    "I don't know, really."
    """
    return _replace_in_order(text, _TRANSFORMERS_CLEANUP)


def _wordpiece_cleanup(text: str) -> str:
    return _replace_in_order(text, _HF_CLEANUP)


def _single_char(component: str, field: str, value: object) -> str:
    if not isinstance(value, str) or len(value) != 1:
        raise FormatError(
            f"decoder {component}: '{field}' must be a single character, got {value!r}"
        )
    return value


_BYTE_ALPHABET = frozenset(CHAR_TO_BYTE)
_CHAR_TO_LATIN1 = {ord(c): b for c, b in CHAR_TO_BYTE.items()}


class ByteLevel:
    """GPT-2 stand-in characters back to bytes, then lossy UTF-8 over the whole sequence.

    >>> ByteLevel()(["Hello", "\u0120w\u00c3\u00b6rld"])
    ['Hello wörld']
    """

    def __init__(
        self, *, add_prefix_space: bool = True, trim_offsets: bool = True, use_regex: bool = True
    ) -> None:
        # Encoding-side settings that ride along in the decoder config; decoding ignores them.
        self.add_prefix_space = add_prefix_space
        self.trim_offsets = trim_offsets
        self.use_regex = use_regex

    def __call__(self, tokens: list[str]) -> list[str]:
        data = bytearray()
        for token in tokens:
            if _BYTE_ALPHABET.issuperset(token):
                data += token.translate(_CHAR_TO_LATIN1).encode("latin-1")
            else:
                # HF keeps a token with any character outside the alphabet as its UTF-8 text.
                data += token.encode("utf-8")
        # Python's "replace" and Rust's from_utf8_lossy both emit one U+FFFD per maximal invalid
        # subpart, so the output matches byte for byte.
        return [data.decode("utf-8", errors="replace")]


_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


def _fallback_byte(token: str) -> int | None:
    if len(token) > 6 or not (token.startswith("<0x") and token.endswith(">")):
        return None
    raw = token.encode("utf-8")
    if len(raw) != 6:
        return None
    digits = raw[3:5]
    if digits[:1] == b"+":
        # HF parses with Rust's u8::from_str_radix, which accepts a leading plus sign.
        digits = digits[1:]
    if not _HEX_DIGITS.issuperset(digits):
        return None
    return int(digits, 16)


def _decode_byte_run(run: bytearray) -> list[str]:
    try:
        return [run.decode("utf-8")]
    except UnicodeDecodeError:
        return [REPLACEMENT_CHARACTER] * len(run)


class ByteFallback:
    """``<0xXX>`` tokens back to bytes; a run that is not valid UTF-8 becomes one U+FFFD per byte.

    >>> ByteFallback()(["<0xE3>", "<0x81>", "<0x82>", "a", "<0xE3>", "<0x81>"])
    ['あ', 'a', '�', '�']
    """

    def __call__(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        run = bytearray()
        for token in tokens:
            byte = _fallback_byte(token)
            if byte is not None:
                run.append(byte)
                continue
            if run:
                out += _decode_byte_run(run)
                run = bytearray()
            out.append(token)
        if run:
            out += _decode_byte_run(run)
        return out


class SentencePiece:
    """``SentencePieceProcessor::Decode``: pieces back to text as the ``sentencepiece`` library does.

    Control pieces vanish, the unknown piece becomes ``unk_surface``, a run of byte pieces is
    decoded one UTF-8 character at a time (each invalid byte a U+FFFD), and ``▁`` becomes a
    space. The leading ``▁`` of the first piece is dropped when the model adds a dummy prefix or
    removes extra whitespace (with ``remove_extra_whitespaces``, of every piece until some text
    has come out). ``denormalizer`` (a normalizer config) is applied to the result.

    >>> SentencePiece(control_pieces=["<s>"], unk_piece="<unk>")(["<s>", "\u2581Hi", "<unk>", "<0x21>"])
    ['Hi ⁇ <0x21>']
    """

    def __init__(
        self,
        *,
        control_pieces: list[str],
        unk_piece: str,
        unk_surface: str = " \u2047 ",
        byte_fallback: bool = False,
        add_dummy_prefix: bool = True,
        remove_extra_whitespaces: bool = True,
        denormalizer: dict[str, Any] | None = None,
    ) -> None:
        self.control_pieces = list(control_pieces)
        self.unk_piece = unk_piece
        self.unk_surface = unk_surface
        self.byte_fallback = byte_fallback
        self.add_dummy_prefix = add_dummy_prefix
        self.remove_extra_whitespaces = remove_extra_whitespaces
        self.denormalizer = denormalizer
        self._control = set(control_pieces)
        self._bytes = {f"<0x{b:02X}>": b for b in range(256)} if byte_fallback else {}
        self._denormalize = normalizers.from_config(denormalizer)

    def __call__(self, tokens: list[str]) -> list[str]:
        text: list[str] = []
        run = bytearray()
        bos_ws, bos_ws_seen = True, False
        strip = self.add_dummy_prefix or self.remove_extra_whitespaces
        for token in tokens:
            byte = self._bytes.get(token)
            if byte is not None:
                run.append(byte)
                continue
            if run:
                text.append(_sentencepiece_bytes(run))
                run = bytearray()
            if bos_ws_seen or any(text):
                bos_ws = False
            bos_ws_seen = False
            if token in self._control:
                continue
            if token == self.unk_piece:
                text.append(self.unk_surface)
                continue
            if bos_ws and strip and token.startswith("\u2581"):
                token = token[1:]
                bos_ws_seen = not self.remove_extra_whitespaces
            text.append(token.replace("\u2581", " "))
        if run:
            text.append(_sentencepiece_bytes(run))
        out = "".join(text)
        if self._denormalize is not None:
            out = self._denormalize(out)
        return [out]


def _sentencepiece_bytes(run: bytearray) -> str:
    """Bytes to text one character at a time, each byte of an invalid sequence a U+FFFD."""
    try:
        return run.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    i = 0
    while i < len(run):
        lead = run[i]
        size = 1 if lead < 0x80 else 2 if lead & 0xE0 == 0xC0 else 3 if lead & 0xF0 == 0xE0 else 4 if lead & 0xF8 == 0xF0 else 0
        try:
            char = bytes(run[i : i + size]).decode("utf-8") if size and i + size <= len(run) else ""
        except UnicodeDecodeError:
            char = ""
        if len(char) == 1:
            out.append(char)
            i += size
        else:
            out.append(REPLACEMENT_CHARACTER)
            i += 1
    return "".join(out)


_PREPEND_SCHEMES = ("always", "first", "never")


class Metaspace:
    """The metaspace character back to spaces; on the first token it is dropped instead.

    ``add_prefix_space`` is the legacy spelling of ``prepend_scheme``; the legacy ``str_rep`` is
    ignored, as HF does.

    >>> Metaspace()(["\u2581Hey", "\u2581friend"])
    ['Hey', ' friend']
    """

    def __init__(
        self,
        *,
        replacement: str = "\u2581",
        prepend_scheme: str | None = None,
        split: bool = True,
        add_prefix_space: bool | None = None,
    ) -> None:
        self.replacement = _single_char("Metaspace", "replacement", replacement)
        if prepend_scheme is None:
            prepend_scheme = "never" if add_prefix_space is False else "always"
        if prepend_scheme not in _PREPEND_SCHEMES:
            raise FormatError(
                f"decoder Metaspace: 'prepend_scheme' must be one of {_PREPEND_SCHEMES}, "
                f"got {prepend_scheme!r}"
            )
        if add_prefix_space is False and prepend_scheme != "never":
            raise FormatError(
                "decoder Metaspace: 'add_prefix_space': false contradicts "
                f"'prepend_scheme': {prepend_scheme!r} (expected 'never')"
            )
        self.prepend_scheme = prepend_scheme
        self.split = split

    def __call__(self, tokens: list[str]) -> list[str]:
        out = [token.replace(self.replacement, " ") for token in tokens]
        if out and self.prepend_scheme != "never":
            # HF drops every metaspace of the first token, not only a leading one.
            out[0] = tokens[0].replace(self.replacement, "")
        return out


class WordPiece:
    """Glue continuation pieces (``##ing``) to the previous token; space before the others.

    >>> "".join(WordPiece()(["un", "##aff", "##able", "day", "!"]))
    'unaffable day!'
    """

    def __init__(self, *, prefix: str = "##", cleanup: bool = True) -> None:
        self.prefix = prefix
        self.cleanup = cleanup

    def __call__(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        for i, token in enumerate(tokens):
            if i > 0:
                if token.startswith(self.prefix):
                    token = token[len(self.prefix) :]
                else:
                    token = " " + token
            out.append(_wordpiece_cleanup(token) if self.cleanup else token)
        return out


class Fuse:
    """Join every token into one.

    >>> Fuse()(["a", "b"])
    ['ab']
    """

    def __call__(self, tokens: list[str]) -> list[str]:
        return ["".join(tokens)]


class Replace:
    """Replace every match of ``pattern`` (``{"String": s}`` or ``{"Regex": r}``) in each token.

    >>> Replace(pattern={"String": "\u2581"}, content=" ")(["\u2581a\u2581b"])
    [' a b']
    """

    def __init__(self, *, pattern: dict[str, str], content: str) -> None:
        if not isinstance(pattern, dict) or len(pattern) != 1 or not (
            set(pattern) <= {"String", "Regex"}
        ):
            raise FormatError(
                f"decoder Replace: 'pattern' must be {{'String': ...}} or {{'Regex': ...}}, "
                f"got {pattern!r}"
            )
        self.pattern = pattern
        self.content = content
        self._literal = pattern.get("String")
        self._regex: regex.Pattern[str] | None = None
        self._timeout = timeout_for(pattern["Regex"]) if "Regex" in pattern else None
        if "Regex" in pattern:
            try:
                self._regex = onig_regex(pattern["Regex"])
            except FormatError as exc:
                raise FormatError(f"decoder Replace: 'pattern.Regex': {exc}") from None

    def __call__(self, tokens: list[str]) -> list[str]:
        return [self._replace(token) for token in tokens]

    def _replace(self, token: str) -> str:
        # HF never matches inside an empty token, not even an empty pattern.
        if not token:
            return token
        if self._regex is None:
            # Leftmost non-overlapping literal matches: what HF's escaped regex finds.
            assert self._literal is not None
            return token.replace(self._literal, self.content)
        try:
            return onig_sub(self._regex, token, self.content, self._timeout)
        except TimeoutError:
            raise too_slow("decoder Replace", self.pattern["Regex"]) from None


class Strip:
    """Remove up to ``start`` leading and ``stop`` trailing ``content`` characters of each token.

    HF panics when the leading and trailing cuts meet or the trailing cut runs past the start
    of the token; here that token simply becomes what is left (possibly ``""``).

    >>> Strip(content=" ", start=1, stop=0)(["  Hello "])
    [' Hello ']
    """

    def __init__(self, *, content: str = " ", start: int = 0, stop: int = 0) -> None:
        self.content = _single_char("Strip", "content", content)
        for field, value in (("start", start), ("stop", stop)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise FormatError(
                    f"decoder Strip: '{field}' must be an integer >= 0, got {value!r}"
                )
        self.start = start
        self.stop = stop

    def __call__(self, tokens: list[str]) -> list[str]:
        return [self._strip(token) for token in tokens]

    def _strip(self, token: str) -> str:
        leading = len(token) - len(token.lstrip(self.content))
        trailing = len(token) - len(token.rstrip(self.content))
        return token[min(leading, self.start) : len(token) - min(trailing, self.stop)]


class BPEDecoder:
    """The end-of-word ``suffix`` becomes a space (nothing on the last token).

    >>> BPEDecoder()(["hel", "lo</w>", "world</w>"])
    ['hel', 'lo ', 'world']
    """

    def __init__(self, *, suffix: str = "</w>") -> None:
        self.suffix = suffix

    def __call__(self, tokens: list[str]) -> list[str]:
        last = len(tokens) - 1
        return [t.replace(self.suffix, "" if i == last else " ") for i, t in enumerate(tokens)]


class CTC:
    """Collapse repeated tokens, drop padding, turn the word delimiter into spaces.

    >>> "".join(CTC()(["<pad>", "h", "h", "e", "<pad>", "y", "|", "y", "o"]))
    'hey yo'
    """

    def __init__(
        self, *, pad_token: str = "<pad>", word_delimiter_token: str = "|", cleanup: bool = True
    ) -> None:
        self.pad_token = pad_token
        self.word_delimiter_token = word_delimiter_token
        self.cleanup = cleanup

    def __call__(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        for token, _repeats in itertools.groupby(tokens):
            token = token.replace(self.pad_token, "")
            if self.cleanup:
                # In HF the delimiter only becomes a space as part of the cleanup.
                token = _wordpiece_cleanup(token).replace(self.word_delimiter_token, " ")
            if token:
                out.append(token)
        return out


class Sequence:
    """Run ``decoders`` one after the other.

    >>> Sequence(decoders=[ByteFallback(), Fuse()])(["a", "<0x62>"])
    ['ab']
    """

    def __init__(self, *, decoders: list[Decoder]) -> None:
        self.decoders = decoders

    def __call__(self, tokens: list[str]) -> list[str]:
        for decoder in self.decoders:
            tokens = decoder(tokens)
        return tokens


_TYPES: dict[str, type] = {
    "BPEDecoder": BPEDecoder, "ByteFallback": ByteFallback, "ByteLevel": ByteLevel, "CTC": CTC,
    "Fuse": Fuse, "Metaspace": Metaspace, "Replace": Replace, "Sequence": Sequence,
    "SentencePiece": SentencePiece, "Strip": Strip, "WordPiece": WordPiece,
}


def from_config(cfg: dict[str, Any] | None) -> Decoder | None:
    """Build the decoder a ``tokenizer.json`` ``"decoder"`` entry describes (``None`` for null)."""
    return build_component("decoder", cfg, _TYPES, "decoders", from_config)

