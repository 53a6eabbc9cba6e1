"""Text that arrives on the command line: Python keeps each byte of an argument that is not UTF-8 as a lone
surrogate (U+DC80-U+DCFF), which TensorFlow cannot turn into a string tensor and gRPC cannot send. Every command
that passes argv text on checks it here first, with one line naming the byte."""

from __future__ import annotations

from bert_keras_cli.errors import CommandError


def check_utf8_text(text: str, name: str) -> None:
    """Refuses a command-line text that was not UTF-8.

    Args:
        text: an argument as sys.argv holds it.
        name: how the message names it ("text 2", "--server").

    Raises:
        CommandError: naming the first byte that is not UTF-8 and its byte offset.

    Example:
        >>> check_utf8_text("caf\\udce9 [MASK]", "text 1")
        Traceback (most recent call last):
        ...
        bert_keras_cli.errors.CommandError: text 1 is not UTF-8: byte 0xe9 at byte offset 3; give it in UTF-8 (a UTF-8 terminal, or convert: iconv -f latin1 -t utf-8)
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        offset = len(text[:e.start].encode("utf-8", "surrogatepass"))
        code = ord(text[e.start])
        byte = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"a lone surrogate U+{code:04X}"
        raise CommandError(f"{name} is not UTF-8: {byte} at byte offset {offset}; give it in UTF-8 (a UTF-8 "
                           "terminal, or convert: iconv -f latin1 -t utf-8)") from None
