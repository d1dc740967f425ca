"""Byte-level tokenizer and the tokenize-and-pack map of the demo pipeline.

Ids: 0 pad, 1 bos, 2 eos, 3 unused, then the 256 byte values as 4..259
(``VOCAB_SIZE`` = 260, as ``pipecheck.workloads.demo`` expects). Like the
text pipelines it stands in for, it is plain Python per document: Unicode
NFKC normalization, whitespace collapsed, UTF-8 bytes to ids, bos/eos added,
then fit to the model's sequence length.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Iterable, Mapping

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from pipecheck.data.sources import TextRecord

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
BYTE_OFFSET = 4
VOCAB_SIZE = BYTE_OFFSET + 256

_WHITESPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """NFKC normalization with runs of whitespace collapsed to one space."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def encode(text: str | bytes) -> list[int]:
    """``[bos] + byte ids + [eos]`` for one document (bytes are decoded as UTF-8 first)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", errors="replace")
    return [BOS_ID, *(b + BYTE_OFFSET for b in normalize(text).encode("utf-8")), EOS_ID]


def decode(ids: Iterable[int]) -> str:
    """Inverse of ``encode`` for the byte ids (special ids dropped)."""
    data = bytes(int(i) - BYTE_OFFSET for i in ids if int(i) >= BYTE_OFFSET)
    return data.decode("utf-8", errors="replace")


def pack(ids: list[int], seq_len: int) -> np.ndarray:
    """Fit one document's ids to exactly ``seq_len``: truncated if longer, padded if shorter."""
    row = ids[:seq_len]
    if len(row) < seq_len:
        row = row + [PAD_ID] * (seq_len - len(row))
    return np.asarray(row, dtype=np.int32)


class TokenizeAndPack:
    """Grain map: one record -> ``{"tokens": int32[seq_len]}``.

    The whole document is tokenized (as ``tokenizer(text, truncation=True,
    padding="max_length")`` does), then fit to ``seq_len``. ``text_key`` picks
    the text out of a record that is a mapping (tfds features); a record that
    is ``bytes``/``str`` is the text itself.
    """

    def __init__(self, seq_len: int, text_key: str = "text") -> None:
        self.seq_len = seq_len
        self.text_key = text_key

    def __repr__(self) -> str:
        return f"TokenizeAndPack(seq_len={self.seq_len})"

    def __call__(self, record: TextRecord) -> dict[str, np.ndarray]:
        if isinstance(record, Mapping):
            if self.text_key not in record:
                keys = ", ".join(sorted(str(k) for k in record))
                raise KeyError(f"record has no text field {self.text_key!r} (fields: {keys}); "
                               "set text_key")
            text = record[self.text_key]
        else:
            text = record
        if isinstance(text, np.ndarray):
            text = text.item() if text.shape == () else bytes(text)
        return {"tokens": pack(encode(text), self.seq_len)}
