"""How every text file is read: UTF-8 (a leading BOM dropped), and the first byte that is not UTF-8 is an error
naming the file, its line and its byte offset, for every reader and command alike (GLUE, SQuAD, SWAG, CoNLL,
`features`, `vocab`, vocab.txt, pretraining corpora).

    text = read_text("train.tsv")                 # str, or DataFormatError("train.tsv, line 7: not UTF-8: ...")
    with open_text("train.tsv", newline="") as f: # what open(path, encoding="utf-8", newline="") gives
        rows = list(csv.reader(f, delimiter="\t"))
    check_utf8("corpus.txt")                      # streams a file of any size, same error
    line = decode_utf8(raw, "corpus.txt", offset=1024)    # one piece of a file read as bytes
"""

from __future__ import annotations

import codecs
import io
import os

from bert_keras import storage
from bert_keras.data.errors import DataFormatError

BOM = codecs.BOM_UTF8
_CHUNK = 1 << 24


def not_utf8(path, data: bytes, error: UnicodeDecodeError, offset: int = 0, line: int | None = 1) -> DataFormatError:
    """The error for `data` (the bytes of `path` from byte `offset`, starting on line `line`; None: unknown,
    counted from the file) failing to decode with `error`.

    Args:
        path: the file.
        data: the bytes that were decoded.
        error: the UnicodeDecodeError of `data.decode("utf-8")`.
        offset: the byte offset of `data` in the file.
        line: the 1-based line `data` starts on, or None to count the lines of the file before the bad byte.

    Returns:
        A DataFormatError naming the file, the line and the byte offset of the first bad byte.

    Example:
        >>> data = "café au lait".encode("latin-1")
        >>> try:
        ...     data.decode("utf-8")
        ... except UnicodeDecodeError as e:
        ...     print(not_utf8("menu.txt", data, e))
        menu.txt, line 1: not UTF-8: byte 0xe9 at byte offset 3 (invalid continuation byte); save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 menu.txt)
    """
    at = offset + error.start
    if line is None:
        line = _line_at(path, at)
    else:
        line += data.count(b"\n", 0, error.start)
    return DataFormatError(path, line, f"not UTF-8: byte 0x{data[error.start]:02x} at byte offset {at} "
                                       f"({error.reason}); save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 "
                                       f"{os.fspath(path)})")


def _line_at(path, offset: int) -> int | None:
    """The 1-based line holding byte `offset` of `path` (None if the file cannot be read again)."""
    try:
        with storage.open(os.fspath(path), "rb") as f:
            line, done = 1, 0
            while done < offset:
                chunk = f.read(min(_CHUNK, offset - done))
                if not chunk:
                    break
                line += chunk.count(b"\n")
                done += len(chunk)
            return line
    except OSError:
        return None


def decode_utf8(data: bytes, path, offset: int = 0, line: int | None = 1) -> str:
    """`data`, bytes of `path` from byte `offset` (line `line`; None: unknown), as text; not UTF-8 is a
    DataFormatError naming the file, the line and the byte offset (see `not_utf8`).

    Args:
        data: bytes read from `path`.
        path: the file they were read from (for the message).
        offset: where `data` starts in the file, in bytes.
        line: the 1-based line `data` starts on; None counts it from the file when an error is raised.

    Returns:
        The decoded str.

    Example:
        >>> decode_utf8("naïve".encode("utf-8"), "words.txt")
        'naïve'
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise not_utf8(path, data, e, offset, line) from None


def read_text(path) -> str:
    """The whole of a UTF-8 text file (a leading BOM dropped; newlines as written).

    Args:
        path: a local file path (or gs://... through tf.io.gfile).

    Returns:
        The text.

    Raises:
        FileNotFoundError: no such file.
        DataFormatError (a ValueError): a byte that is not UTF-8 (the message names the line and byte offset).

    Example:
        >>> _ = open("hello.txt", "w", encoding="utf-8").write("hello\\nworld\\n")
        >>> read_text("hello.txt").splitlines()
        ['hello', 'world']
    """
    if "://" not in os.fspath(path) and not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {os.fspath(path)}")
    with storage.open(os.fspath(path), "rb") as f:
        data = f.read()
    skip = len(BOM) if data.startswith(BOM) else 0
    return decode_utf8(data[skip:], path, offset=skip)


def open_text(path, newline: str | None = None) -> io.StringIO:
    """A UTF-8 text file as `open(path, encoding="utf-8", newline=newline)` reads it (lines, universal newlines
    unless `newline` is given), read whole first by `read_text`, so a byte that is not UTF-8 is an error naming
    its line and byte offset before any line is handed out.

    Args:
        path: a local file path (or gs://...).
        newline: as `open`'s: None translates \\r\\n and \\r to \\n; "" keeps them (for csv).

    Returns:
        An io.StringIO (a context manager, iterable by lines).

    Example:
        >>> _ = open("two.txt", "w", encoding="utf-8").write("a\\r\\nb\\n")
        >>> with open_text("two.txt") as f:
        ...     list(f)
        ['a\\n', 'b\\n']
    """
    return io.StringIO(read_text(path), newline=newline)


def check_utf8(path) -> None:
    """Reads `path` through in chunks (any size, constant memory) and raises at its first byte that is not UTF-8.

    Args:
        path: a local file path (or gs://... through tf.io.gfile).

    Raises:
        FileNotFoundError: no such file.
        DataFormatError (a ValueError): a byte that is not UTF-8 (the message names the line and byte offset).

    Example:
        >>> _ = open("corpus.txt", "w", encoding="utf-8").write("one sentence\\n\\nanother document\\n")
        >>> check_utf8("corpus.txt")
    """
    if "://" not in os.fspath(path) and not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {os.fspath(path)}")
    decoder = codecs.getincrementaldecoder("utf-8")()
    consumed, line = 0, 1
    with storage.open(os.fspath(path), "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            pending = decoder.getstate()[0]          # the start of a character the last chunk cut (no newline)
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:          # e.object: pending + chunk
                raise not_utf8(path, e.object, e, consumed - len(pending), line) from None
            if not chunk:
                return
            line += chunk.count(b"\n")
            consumed += len(chunk)
