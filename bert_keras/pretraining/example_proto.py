"""tf.train.Example protos of fixed-length features, encoded for a whole batch at once in NumPy.

Why: a protobuf Python object per record is slow, and TF's encode_proto kernel has to nest five messages; this
writes the wire format directly, many times faster (docs/performance.md). The layout
(tensorflow/core/example/example.proto and feature.proto; tag byte = field number << 3 | 2, "length-delimited"):

  Example   = 0A len(Features) Features                               features = 1
  Features  = for each feature, keys sorted: 0A len(Entry) Entry      map<string, Feature> feature = 1
  Entry     = 0A len(key) key 12 len(Feature) Feature                 key = 1, value = 2
  Feature   = 1A len(List) List (int64_list = 3) or 12 len(List) List (float_list = 2)
  List      = 0A len(packed) packed, or nothing when there are no values   repeated value = 1 [packed]
  packed    = int64: varints (7 bits a byte, low group first, high bit set while more follow; a negative value
              is its 64-bit two's complement, 10 bytes); float32: 4 little-endian bytes each

Keys sorted is what protobuf's deterministic serializer writes, so the bytes equal
`tf.train.Example(...).SerializeToString(deterministic=True)` (tests/pretraining check it); readers accept any order.

Each record is one row of a [N, W] byte matrix with a keep mask: a varint gets its widest size in the batch as
columns and masks the ones it does not use. The kept bytes read row by row are the records back to back.
"""

from __future__ import annotations

import functools

import numpy as np


def _unsigned(values: np.ndarray) -> tuple[np.ndarray, int]:
    """int64 values as unsigned (negatives become their two's complement), narrowed to uint32 when they fit;
    and the largest."""
    values = np.asarray(values)
    if values.dtype.itemsize <= 4 and values.size and values.min() >= 0:      # ids, masks: no int64 copy
        return values.astype(np.uint32, copy=False), int(values.max())
    u = values.astype(np.int64, copy=False).view(np.uint64)
    top = int(u.max(initial=0))
    return (u.astype(np.uint32) if top < 2 ** 32 else u), top


def _sizes(u: np.ndarray, top: int) -> np.ndarray:
    size = np.ones(u.shape, np.int64)
    for k in range(1, (top.bit_length() + 6) // 7):
        size += u >= (1 << 7 * k)
    return size


def varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes of each int64's varint, same shape: 1 below 128, 2 below 2**14, ..., 10 for negatives."""
    return _sizes(*_unsigned(values))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _varint_columns(values: np.ndarray):
    """[N] or [N, k] int64 -> (bytes [N, k * W] uint8, keep [N, k * W] bool, or None when every byte is kept):
    W = the widest varint."""
    n = len(values)
    u, top = _unsigned(values)
    width = max(1, (top.bit_length() + 6) // 7)
    if width == 1:                                          # every value below 128: its own byte
        return u.astype(np.uint8).reshape(n, -1), None
    if width <= 3 and top < max(1 << 16, u.size):           # token ids: one gather from a table of every value
        data, keep = _varint_table((1 << top.bit_length()) - 1)  # cached: one table per bit length
        return np.take(data, u).view(np.uint8).reshape(n, -1), np.take(keep, u).view(bool).reshape(n, -1)
    groups, keep = _varint_groups(u, top, width)
    return groups.reshape(n, -1), keep.reshape(n, -1)


def _varint_groups(u: np.ndarray, top: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Unsigned values [...] (all <= top) -> their varint bytes [..., width] uint8 and which of them are used
    [..., width] bool: 7 bits a byte, low group first, the high bit set on every used byte but the last."""
    size = _sizes(u, top)[..., None]
    j = np.arange(width, dtype=u.dtype)
    groups = ((u[..., None] >> (j * u.dtype.type(7))) & u.dtype.type(0x7F)).astype(np.uint8)
    groups |= (j < size - 1).astype(np.uint8) << np.uint8(7)
    return groups, j < size


@functools.lru_cache(maxsize=8)
def _varint_table(top: int) -> tuple[np.ndarray, np.ndarray]:
    """The varints of 0..top (< 2**21, so at most 3 bytes) as 4 bytes each, low byte first, in uint32 ("<u4")
    entries; and the same entries' keep masks (byte k is 1 when the varint has a k-th byte). Four bytes, not
    three: a [N, k] gather of uint32 viewed as bytes is faster than cutting a fourth byte off."""
    groups, keep = _varint_groups(np.arange(top + 1, dtype=np.uint32), top, 4)
    return groups.view("<u4")[:, 0], keep.view(np.uint8).view("<u4")[:, 0]


def _constant(n: int, data: bytes):
    row = np.frombuffer(data, np.uint8)
    return np.broadcast_to(row, (n, len(row))), None


def _kept(block) -> np.ndarray:
    """Bytes each row keeps of a (bytes, keep) block, [N] int64 (keep None: all of them)."""
    data, keep = block
    if keep is None:
        return np.full(len(data), data.shape[1], np.int64)
    return keep.view(np.uint8).sum(axis=1, dtype=np.int64)


def encode_examples(features: dict) -> tuple[np.ndarray, np.ndarray]:
    """{name: [N, k] array} (float32 -> float_list, any integer dtype -> int64_list) -> (the N serialized
    tf.train.Example protos back to back as uint8 [total bytes], end offset of each [N] int64)."""
    blocks, sizes = example_blocks(features)
    return join_blocks(blocks), np.cumsum(sizes)


def example_blocks(features: dict) -> tuple[list, np.ndarray]:
    """The N protos as column blocks, (bytes [N, w] uint8, keep [N, w] bool or None = all kept), whose kept
    bytes read row by row are the records (join_blocks); and each record's size in bytes [N] int64."""
    names = sorted(features)
    n = len(features[names[0]])
    blocks, features_size = [], np.zeros(n, np.int64)
    for name in names:
        values = np.asarray(features[name])
        if values.ndim != 2 or len(values) != n:
            raise ValueError(f"feature {name!r} has shape {values.shape}: each feature must be [{n}, k]")
        if values.dtype == np.float32:
            tag = b"\x12"
            packed = (np.ascontiguousarray(values.astype("<f4")).view(np.uint8).reshape(n, -1), None)
        elif np.issubdtype(values.dtype, np.integer):
            tag = b"\x1a"
            packed = _constant(n, b"") if values.shape[1] == 0 else _varint_columns(values)
        else:
            raise ValueError(f"feature {name!r} is {values.dtype}: int64_list takes integers, float_list float32")
        packed_size = _kept(packed)
        lists = ([] if values.shape[1] == 0 else [_constant(n, b"\x0a"), _varint_columns(packed_size), packed])
        list_size = packed_size + (0 if values.shape[1] == 0 else 1 + varint_sizes(packed_size))
        feature_size = 1 + varint_sizes(list_size) + list_size
        key = name.encode()
        entry_size = 2 + len(_varint(len(key))) + len(key) + varint_sizes(feature_size) + feature_size
        blocks += [_constant(n, b"\x0a"), _varint_columns(entry_size),
                   _constant(n, b"\x0a" + _varint(len(key)) + key + b"\x12"), _varint_columns(feature_size),
                   _constant(n, tag), _varint_columns(list_size), *lists]
        features_size = features_size + 1 + varint_sizes(entry_size) + entry_size
    blocks = [_constant(n, b"\x0a"), _varint_columns(features_size)] + blocks
    return blocks, 1 + varint_sizes(features_size) + features_size


def join_blocks(blocks: list) -> np.ndarray:
    """Column blocks (see example_blocks) -> their kept bytes, row after row, uint8 [total]."""
    # One [N, W] byte matrix and its keep mask, filled block by block; the mask starts all True, so only blocks
    # with unused varint bytes write to it.
    n, width = len(blocks[0][0]), sum(data.shape[1] for data, _ in blocks)
    data, keep, column = np.empty((n, width), np.uint8), np.ones((n, width), bool), 0
    for block, block_keep in blocks:
        data[:, column:column + block.shape[1]] = block
        if block_keep is not None:
            keep[:, column:column + block.shape[1]] = block_keep
        column += block.shape[1]
    # np.compress on the flat arrays (faster than boolean indexing with a 2-D mask), 512 rows at a time: it
    # makes an int64 index of every kept byte, ~3 MB per 512 rows instead of ~13 MB for a batch of 2,048.
    rows = 512
    kept = [np.compress(keep[i:i + rows].reshape(-1), data[i:i + rows].reshape(-1)) for i in range(0, n, rows)]
    return np.concatenate([np.zeros(0, np.uint8), *kept])
