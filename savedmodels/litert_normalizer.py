"""BERT's exact character normalisation as a TF.Text FastBertNormalize model: the LiteRT export's normaliser.

TF.Text's FastBertNormalize has a TFLite kernel, but the model its builder makes folds with NFKC_Casefold
(³ -> 3, ﬁ -> fi, ǅ -> dz) and turns controls into spaces, unlike the reference tokenizer. The kernel itself only
looks each character up in a table (a darts-clone double-array trie keyed by the character's UTF-8 bytes, the
value pointing into a pool of replacement strings), so this module builds that table from our own per-character
rules instead (bert_keras.preprocessing.normalize, the rules the SavedModel runs and the tests hold to HF):

  * separators (\\t \\n \\r, Zs, Zl, Zp) -> " ";
  * dropped (Cc, Cf, Co, U+FFFD, NUL) -> "";
  * uncased vocabularies: NFD, drop Mn, lower-case each character alone;
  * invalid UTF-8: every byte sequence the kernel steps over as one unit (ICU's U8_FWD_1: a lone byte, or a lead
    byte with the valid start of its trail) -> "", as the SavedModel reads it as U+FFFD and drops it.

Splitting into words (whitespace, punctuation, CJK ideographs) is left to FastWordpiece's end-to-end mode on the
normalised text, exactly as bert_keras.preprocessing.wordpiece does.

    model = normalizer_model(lower_case=True)          # bytes: the flatbuffer FastBertNormalize reads
"""

from __future__ import annotations

import functools

import numpy as np

SEPARATORS = r"[\t\n\r\p{Z}]"
_VALUE_FLAG = 0x40000000          # TF.Text's kIsNormalizedStringDifferentMask
_LENGTH_BITS = 6                  # kBitsToEncodeUtf8LengthOfNormalizedString


def character_table(lower_case: bool) -> dict[bytes, bytes]:
    """{UTF-8 key: normalised UTF-8} for every code point (and invalid byte sequence) that normalisation
    changes; the others are left as they are."""
    import tensorflow as tf

    from bert_keras.preprocessing.normalize import normalize_characters
    # Planes 4-13 hold no assigned character in any Unicode version: unassigned code points are kept as they
    # are, so they need no entry. Surrogates cannot occur in UTF-8.
    points = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, 0x40000), np.arange(0xE0000, 0x110000)])
    chars = tf.strings.unicode_encode(tf.reshape(points.astype(np.int32), [-1, 1]), "UTF-8")
    normalized = tf.where(tf.strings.regex_full_match(chars, SEPARATORS), " ",
                          normalize_characters(chars, lower_case)).numpy()
    keys = chars.numpy()
    table = {k: v for k, v in zip(keys, normalized) if k != v}
    table.update({key: b"" for key in _invalid_sequences()})
    return table


def _invalid_sequences():
    """Every unit ICU's U8_FWD_1 steps over that is not a whole character: lone bytes 0x80-0xFF, and lead bytes
    followed by the valid beginning of their trail bytes only (a truncated character)."""
    out = [bytes([b]) for b in range(0x80, 0x100)]
    trail = range(0x80, 0xC0)
    for lead in range(0xE0, 0xF0):                      # three-byte characters, cut after one trail byte
        first = range(0xA0, 0xC0) if lead == 0xE0 else range(0x80, 0xA0) if lead == 0xED else trail
        out += [bytes([lead, t]) for t in first]
    for lead in range(0xF0, 0xF5):                      # four-byte characters, cut after one or two
        first = range(0x90, 0xC0) if lead == 0xF0 else range(0x80, 0x90) if lead == 0xF4 else trail
        for t in first:
            out.append(bytes([lead, t]))
            out += [bytes([lead, t, u]) for u in trail]
    return out


def double_array(keys: list[bytes], values: list[int]) -> np.ndarray:
    """A darts-clone double-array trie (the unit layout TF.Text's DartsCloneTrieWrapper reads) mapping each key
    to its value (0 <= value < 2**31). Keys: non-empty, no NUL byte, distinct.

    Each node's children sit at `base ^ label` (label 0: the node's value), with `offset = node ^ base` in the
    node's unit; every base is used by one node only, so a child's label identifies its parent."""
    root: dict = {}
    for key, value in zip(keys, values):
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[0] = value                                  # the value's slot: label 0
    size = 1 << 12
    used = np.zeros(size, bool)
    units = np.zeros(size, np.uint32)
    used[0] = True
    bases: set[int] = set()
    queue = [(0, root)]
    cursor = 1                                           # the first position that may be free
    while queue:
        position, node = queue.pop()
        labels = sorted(node)
        while cursor < len(used) and used[cursor]:
            cursor += 1
        candidate = cursor
        while True:
            while candidate < len(used) and used[candidate]:
                candidate += 1
            base = candidate ^ labels[0]
            spots = [base ^ label for label in labels]
            if max(spots) >= len(used):
                grow = max(len(used), max(spots) + 1)
                used = np.concatenate([used, np.zeros(grow, bool)])
                units = np.concatenate([units, np.zeros(grow, np.uint32)])
            if base not in bases and not any(used[spot] for spot in spots):
                break
            candidate += 1
        bases.add(base)
        used[spots] = True
        offset = position ^ base
        if offset >= 1 << 21:
            raise ValueError("the normalisation trie outgrew darts-clone's offset field (2**21 units)")
        units[position] |= np.uint32(offset << 10 | (0x100 if 0 in node else 0))
        for label, spot in zip(labels, spots):
            if label == 0:
                units[spot] = np.uint32(0x80000000 | node[0])
            else:
                units[spot] = np.uint32(label)
                queue.append((spot, node[label]))
    return units[:int(np.flatnonzero(used).max()) + 1]


@functools.lru_cache(maxsize=4)
def normalizer_model(lower_case: bool) -> bytes:
    """The FastBertNormalizerModel flatbuffer for our normalisation (see the module docstring)."""
    import flatbuffers

    table = character_table(lower_case)
    pool, where = bytearray(), {}
    keys, values = [], []
    zero = _VALUE_FLAG                                   # NUL: dropped (the trie cannot hold an empty key)
    for key in sorted(table):
        if key == b"\x00":
            continue
        replacement = table[key]
        value = _VALUE_FLAG
        if replacement:
            if replacement not in where:
                where[replacement] = len(pool)
                pool += replacement
            value |= len(replacement) | where[replacement] << _LENGTH_BITS
        keys.append(key)
        values.append(value)
    units = double_array(keys, values)
    builder = flatbuffers.Builder(len(units) * 4 + len(pool) + 1024)
    pool_vector = builder.CreateNumpyVector(np.frombuffer(bytes(pool), np.uint8))
    trie_vector = builder.CreateNumpyVector(units.astype("<u4"))
    builder.StartObject(4)
    builder.PrependUOffsetTRelativeSlot(3, pool_vector, 0)           # normalized_string_pool
    builder.PrependInt32Slot(2, zero, 0)                             # data_for_codepoint_zero
    builder.PrependUOffsetTRelativeSlot(1, trie_vector, 0)           # trie_array
    builder.PrependBoolSlot(0, lower_case, False)                    # lower_case_nfd_strip_accents (unused)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())
