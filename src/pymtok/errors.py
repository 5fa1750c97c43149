"""The exceptions pymtok raises; every message names the file, section or line at fault."""


class PymtokError(Exception):
    """Base class of every error pymtok raises on purpose."""


class FormatError(PymtokError, ValueError):
    """A tokenizer file (or config) is malformed, truncated or uses something we cannot read."""


class TemplateError(PymtokError):
    """A chat template failed to render, raised on purpose, or exceeded its resource bounds."""


class TextError(PymtokError, ValueError):
    """A text to encode is not one: bytes of an Arrow string column that are not UTF-8."""
