"""pymtok in data engines: one batch function for HF ``datasets``' ``map``, Ray Data's
``map_batches`` and Dask's ``map_partitions``.

The engines are not dependencies of pymtok: pyarrow (and pandas for a DataFrame batch) is imported
only when a batch is tokenized. A text column that is Arrow (a ``pyarrow.Table`` or
``RecordBatch``, a pyarrow-backed pandas column) is read from its buffers
(``Tokenizer.encode_arrow``), without a Python str per text; the ids leave as Arrow list arrays
built from the flat ids, without a Python list per text. A tokenizer read from a
``.mtok`` file reaches each worker as the file's path (or bytes) and is loaded once per worker
process (see ``Tokenizer.__reduce__``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .tokenizer import Tokenizer


class Tokenize:
    """A batch function: the texts of ``column`` in, ``input_ids`` (and optionally
    ``attention_mask`` and ``length``) out, as Arrow ``large_list<uint32>`` / ``int64`` columns.

    A ``pyarrow.Table``, ``pyarrow.RecordBatch`` or ``pandas.DataFrame`` batch comes back with
    the new columns appended (``datasets``' ``with_format("arrow").map(batched=True)``, Ray
    Data's ``batch_format="pyarrow"`` / ``"pandas"``, Dask partitions); a mapping of columns
    (``datasets``' ``map(batched=True)`` without a format) gets the new columns only, which
    ``datasets`` adds to its rows. Ids are ``tokenizer.encode_batch(texts,
    add_special_tokens=...)``'s; a text that is not a str (a null) is a TypeError.

    An Arrow text column (of a table, a record batch, a mapping, or a pandas column with
    ``string[pyarrow]``, ``str`` or ``pd.ArrowDtype``) goes through ``encode_arrow``: no Python
    str per text. It must be ``string`` or ``large_string`` (``string_view`` is a TypeError).

    ``num_threads`` is the native core's threads per call: engines give each worker a core, so 1.

    >>> ds.map(Tokenize(tok), batched=True, num_proc=4)                       # doctest: +SKIP
    >>> ray_ds.map_batches(Tokenize, fn_constructor_args=(tok,), concurrency=4,
    ...                    batch_format="pyarrow")                            # doctest: +SKIP
    >>> dask_tokenize(frame, tok)                                             # doctest: +SKIP
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        column: str = "text",
        *,
        add_special_tokens: bool = True,
        attention_mask: bool = False,
        length: bool = False,
        num_threads: int = 1,
    ) -> None:
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"Tokenize() takes a pymtok Tokenizer, got {type(tokenizer).__name__}")
        if not isinstance(column, str):
            raise TypeError(f"Tokenize(): column must be a str, got {type(column).__name__}")
        for name, flag in (
            ("add_special_tokens", add_special_tokens), ("attention_mask", attention_mask), ("length", length)
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"Tokenize(): {name} must be a bool, got {type(flag).__name__}")
        if not isinstance(num_threads, int) or isinstance(num_threads, bool) or num_threads < 1:
            raise TypeError(f"Tokenize(): num_threads must be an int >= 1, got {num_threads!r}")
        self.tokenizer = tokenizer
        self.column = column
        self.add_special_tokens = add_special_tokens
        self.attention_mask = attention_mask
        self.length = length
        self.num_threads = num_threads

    def columns(self, texts: Any) -> dict[str, Any]:
        """The new columns for ``texts`` (a pyarrow string column, or a list of texts), as pyarrow arrays."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if isinstance(texts, (pa.Array, pa.ChunkedArray)):
            flat = self.tokenizer.encode_arrow(
                texts, add_special_tokens=self.add_special_tokens, num_threads=self.num_threads
            )
        else:
            flat = self.tokenizer.encode_batch(
                texts, add_special_tokens=self.add_special_tokens, num_threads=self.num_threads, return_flat=True
            )
        ids = flat.to_arrow()
        out: dict[str, Any] = {"input_ids": ids}
        if self.attention_mask:
            ones = pa.Array.from_buffers(pa.int8(), len(flat.ids), [None, pa.py_buffer(b"\x01" * len(flat.ids))])
            out["attention_mask"] = pa.LargeListArray.from_arrays(ids.offsets, ones)
        if self.length:
            out["length"] = pc.list_value_length(ids)
        return out

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        if isinstance(batch, (pa.Table, pa.RecordBatch)):
            new = self.columns(self._column(batch))
            for name, values in new.items():
                batch = batch.append_column(name, values)
            return batch
        if _is_pandas_frame(batch):
            import pandas as pd

            new = self.columns(_texts(self._column(batch)))
            return batch.assign(**{
                name: pd.Series(pd.arrays.ArrowExtensionArray(values), index=batch.index) for name, values in new.items()
            })
        if isinstance(batch, Mapping):
            import pandas as pd

            column = self._column(batch)
            new = self.columns(column if isinstance(column, (pa.Array, pa.ChunkedArray)) else _texts(column))
            # datasets takes lists, numpy arrays or pandas Series as a batch's columns; a Series
            # over the Arrow array reaches its writer without a Python list per text
            return {name: pd.Series(pd.arrays.ArrowExtensionArray(values)) for name, values in new.items()}
        raise TypeError(
            "Tokenize: a batch is a pyarrow.Table or RecordBatch, a pandas.DataFrame or a mapping of columns, "
            f"got {type(batch).__name__}"
        )

    def _column(self, batch: Any) -> Any:
        names = batch.column_names if hasattr(batch, "column_names") else list(batch.keys())
        if self.column not in names:
            raise KeyError(f"Tokenize: the batch has no column {self.column!r} (it has {sorted(map(str, names))})")
        return batch[self.column]


def _texts(column: Any) -> Any:
    """A column's texts: the Arrow array under a pyarrow-backed pandas column (``pd.ArrowDtype``,
    ``string[pyarrow]``, pandas 3's ``str``), which ``pa.array`` takes without a copy; else a list."""
    if getattr(getattr(column, "dtype", None), "storage", None) == "pyarrow":
        import pyarrow as pa

        return pa.array(column)
    return column.tolist() if hasattr(column, "tolist") else list(column)


def _is_pandas_frame(batch: Any) -> bool:
    return type(batch).__module__.startswith("pandas") and type(batch).__name__ == "DataFrame"


def dask_tokenize(frame: Any, tokenizer: Tokenizer, column: str = "text", **options: Any) -> Any:
    """A Dask DataFrame's partitions through :class:`Tokenize` (``map_partitions``): the frame
    with ``input_ids`` (and what ``options`` ask for) added, as pyarrow-backed columns."""
    fn = Tokenize(tokenizer, column, **options)
    # the output's schema from the empty partition Dask keeps as the frame's meta
    return frame.map_partitions(fn, meta=fn(frame._meta))
