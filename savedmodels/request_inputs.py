"""A Predict request's inputs fitted to the signature that will run them, before it is sent: the names, dtypes
and shapes the SignatureDef declares (GetModelMetadata), so a request that does not fit is refused with one line
that says what the signature takes and what was given, not with the server's "input size does not match
signature: 1!=1".

Values are nested lists (JSON's shapes) or flat lists of texts. A value one dimension short of its input is one
example: `["He plays.", "He eats."]` for multiple choice's `endings` [batch, choices] is one row of two choices;
`"a film"` for `text` [batch] is a batch of one.

    arrays = fit_inputs({"context": ["A man sits."], "endings": [["He plays.", "He eats."]]}, signature_def)
    client.predict(arrays)
"""

from __future__ import annotations

import re

import numpy as np
import tensorflow as tf


class RequestError(ValueError):
    """Inputs that do not fit the signature; the message is one line naming both sides."""


def dims(shape: tf.TensorShape | None) -> str:
    """A shape as a user reads it: the first unknown dimension is the batch, later ones any size.

    Args:
        shape: a tf.TensorShape, or None for an unknown rank.

    Example:
        >>> dims(tf.TensorShape([None, None]))
        '[batch, any]'
    """
    if shape is None or shape.rank is None:
        return "[any shape]"
    names = [("batch" if i == 0 else "any") if d is None else str(d) for i, d in enumerate(shape.as_list())]
    return f"[{', '.join(names)}]"


def input_specs(signature_def) -> dict[str, tuple[tf.DType, tf.TensorShape | None]]:
    """{input name: (dtype, shape or None for an unknown rank)} of a SignatureDef, by name.

    Args:
        signature_def: a SignatureDef proto (ServingClient.metadata()[name]).

    Example:
        >>> specs = input_specs(ServingClient("localhost:8500", "swag").metadata()["serving_default"])  # doctest: +SKIP
        >>> specs["endings"]                                                                           # doctest: +SKIP
        (tf.string, TensorShape([None, None]))
    """
    out = {}
    for name in sorted(signature_def.inputs):
        info = signature_def.inputs[name]
        shape = None if info.tensor_shape.unknown_rank else tf.TensorShape(info.tensor_shape)
        out[name] = (tf.dtypes.as_dtype(info.dtype), shape)
    return out


def describe_signature(signature_def) -> str:
    """"text_a (string [batch]), text_b (string [batch])": each input with its dtype and shape.

    Args:
        signature_def: a SignatureDef proto.

    Example:
        >>> describe_signature(client.metadata()["serving_default"])    # doctest: +SKIP
        'context (string [batch]), endings (string [batch, any])'
    """
    return ", ".join(f"{name} ({dtype.name} {dims(shape)})"
                     for name, (dtype, shape) in input_specs(signature_def).items())


def describe_arrays(arrays: dict) -> str:
    """"text (string [2])": what a request holds.

    Args:
        arrays: {name: numpy array} (object arrays of bytes are strings).

    Example:
        >>> describe_arrays({"text": np.array([b"a", b"b"], object)})
        'text (string [2])'
    """
    def dtype(a):
        return "string" if a.dtype.kind in "OSU" else tf.dtypes.as_dtype(a.dtype).name
    return ", ".join(f"{name} ({dtype(a)} [{', '.join(map(str, a.shape))}])" for name, a in sorted(arrays.items()))


def _nested(value, path: str):
    """(shape, leaves) of nested lists; RequestError for rows of different lengths."""
    if not isinstance(value, (list, tuple)):
        return [], [value]
    parts = [_nested(v, f"{path}[{i}]") for i, v in enumerate(value)]
    shapes = {tuple(s) for s, _ in parts}
    if len(shapes) > 1:
        lengths = sorted({s[0] if s else 1 for s, _ in parts})
        raise RequestError(f"{path}: its rows differ in length ({', '.join(map(str, lengths))}); a tensor needs as "
                           "many values in each row")
    inner = list(shapes.pop()) if shapes else []
    return [len(value), *inner], [leaf for _, leaves in parts for leaf in leaves]


def _utf8(text: str, name: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:          # a command line's bytes that are not UTF-8 (surrogate escapes)
        bad = ord(text[e.start])
        byte = f"byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"U+{bad:04X}"
        raise RequestError(f"{name}: the text is not UTF-8 ({byte} at character {e.start}); give UTF-8 text "
                           "(iconv -t UTF-8 converts a file)") from None


def as_array(name: str, value, dtype: tf.DType) -> np.ndarray:
    """A value (nested lists) as a numpy array of `dtype`: texts UTF-8 encoded into an object array of bytes.

    Args:
        name: the input's name, for the messages.
        value: str, bytes, a number or nested lists of one kind.
        dtype: the dtype the input takes.

    Raises:
        RequestError: values of another kind, rows of different lengths, text that is not UTF-8 (a command line's
            surrogate escapes), an integer out of range.

    Example:
        >>> as_array("endings", [["a", "b"]], tf.string)
        array([[b'a', b'b']], dtype=object)
    """
    shape, leaves = _nested(value, name)
    if dtype == tf.string:
        if not all(isinstance(v, (str, bytes)) for v in leaves):
            raise RequestError(f"{name} takes text; got {_kinds(leaves)}")
        data = [v if isinstance(v, bytes) else _utf8(v, name) for v in leaves]
        return np.array(data, dtype=object).reshape(shape)
    if dtype.is_bool:
        ok = all(isinstance(v, bool) for v in leaves)
    elif dtype.is_integer:
        ok = all(isinstance(v, int) and not isinstance(v, bool) for v in leaves)
    else:
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in leaves)
    if not ok:
        raise RequestError(f"{name} takes {dtype.name} values; got {_kinds(leaves)}")
    if dtype.is_integer and not all(dtype.min <= v <= dtype.max for v in leaves):
        raise RequestError(f"{name}: a value is outside {dtype.name}'s range ({dtype.min}..{dtype.max})")
    return np.array(leaves, dtype=dtype.as_numpy_dtype).reshape(shape)


def _kinds(leaves) -> str:
    kinds = sorted({"text" if isinstance(v, (str, bytes)) else type(v).__name__ for v in leaves})
    return " and ".join(kinds) or "nothing"


def fit_inputs(values: dict, signature_def, signature_name: str = "serving_default") -> dict[str, np.ndarray]:
    """{input name: nested lists} -> {input name: numpy array} of the signature's dtypes and ranks, checked
    against it: the names, each input's dtype and rank (a value one dimension short is one example), fixed
    dimensions, and one batch size for all.

    Args:
        values: {name: str | number | nested lists of them}; texts as str (UTF-8 encoded here) or bytes.
        signature_def: the SignatureDef the request is for.
        signature_name: its name, for the messages.

    Returns:
        {name: numpy array}: strings as object arrays of bytes.

    Raises:
        RequestError: one line saying what the signature takes and what was given.

    Example:
        >>> fit_inputs({"context": ["A man sits."], "endings": [["He plays.", "He eats."]]},
        ...            client.metadata()["serving_default"])                     # doctest: +SKIP
        {'context': array([b'A man sits.'], dtype=object), 'endings': array([[b'He plays.', b'He eats.']], ...)}
    """
    specs = input_specs(signature_def)
    takes = f"signature {signature_name} takes {describe_signature(signature_def)}"
    missing, extra = sorted(set(specs) - set(values)), sorted(set(values) - set(specs))
    if missing or extra:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"{', '.join(extra)} not in it"] if extra else [])
        raise RequestError(f"{takes}; sent {', '.join(sorted(values)) or 'nothing'} ({'; '.join(parts)})")
    arrays = {}
    for name, (dtype, shape) in specs.items():
        array = as_array(name, values[name], dtype)
        if shape is not None and array.ndim == shape.rank - 1:
            array = array[None]                                 # one example
        if shape is not None and not shape.is_compatible_with(array.shape):
            raise RequestError(f"{name} takes {dtype.name} {dims(shape)}; sent {describe_arrays({name: array})}: "
                               f"{takes}")
        arrays[name] = array
    batches = {name: a.shape[0] for name, a in arrays.items() if a.ndim}
    if len(set(batches.values())) > 1:
        raise RequestError(f"the inputs' batch sizes differ ({', '.join(f'{n} {b}' for n, b in batches.items())}): "
                           f"one row per example in each; {takes}")
    return arrays


_SIZE_MISMATCH = re.compile(r"input size does not match signature: \d+!=\d+ len\(\{(.*?)\}\) != len\(\{(.*?)\}\)")


def translate_error(message: str, signature_name: str, sent: dict, signature_def=None) -> str:
    """A server's INVALID_ARGUMENT in one line that says what the signature takes and what was sent. TF
    Serving's "input size does not match signature: 1!=1 len({txt}) != len({text}). Sent extra: ..." becomes
    "signature serving_default takes text; sent txt".

    Args:
        message: the server's message.
        signature_name: the signature the request named.
        sent: {name: numpy array} that was sent.
        signature_def: its SignatureDef, when the server told it (GetModelMetadata), for dtypes and shapes.

    Example:
        >>> translate_error("input size does not match signature: 1!=1 len({txt}) != len({text}). Sent extra: "
        ...                 "{txt}. Missing but required: {text}.", "serving_default",
        ...                 {"txt": np.array([b"a"], object)})
        'signature serving_default takes text; sent txt (string [1])'
    """
    sent_text = describe_arrays(sent) if sent else "nothing"
    takes = describe_signature(signature_def) if signature_def is not None else None
    match = _SIZE_MISMATCH.search(message)
    if match:
        return f"signature {signature_name} takes {takes or match.group(2).replace(',', ', ')}; sent {sent_text}"
    first = message.strip().splitlines()[0] if message.strip() else "invalid argument"
    return f"{first} (signature {signature_name} takes {takes}; sent {sent_text})" if takes else \
        f"{first} (sent {sent_text})"
