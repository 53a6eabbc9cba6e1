"""CoNLL-2003 NER reader.

Layout: one token per line, ``token POS chunk NER`` separated by single spaces; a blank line
ends a sentence; ``-DOCSTART- -X- -X- O`` lines mark documents (they are not sentences and
are dropped). The common ``conll2003`` copies use **IOB2** tags (``B-``/``I-``); the original
Reuters files use IOB1 (convert with ``iob1_to_iob2``).

``CONLL2003_LABELS`` is the fixed label order of the HF ``conll2003`` dataset.
"""

from __future__ import annotations

import dataclasses

from bert_keras.data.errors import DataFormatError
from bert_keras.data.text_files import open_text

CONLL2003_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """One CoNLL-2003 sentence: its words and their IOB2 entity tags (and the POS and chunk columns, if read)."""

    tokens: tuple[str, ...]
    tags: tuple[str, ...]
    pos_tags: tuple[str, ...] = ()
    chunk_tags: tuple[str, ...] = ()


def iob1_to_iob2(tags):
    """IOB1 -> IOB2: an ``I-X`` that does not continue an ``X`` chunk becomes ``B-X``."""
    out = []
    for i, tag in enumerate(tags):
        if tag.startswith("I-") and (i == 0 or out[-1] == "O" or out[-1][2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
    return out


def read_conll2003(path, labels=CONLL2003_LABELS) -> list[TaggedSentence]:
    """Sentences of a CoNLL-2003 file. Every NER tag must be in ``labels`` (pass ``None`` to accept any)."""
    allowed = set(labels) if labels is not None else None
    sentences = []
    tokens, pos, chunk, tags = [], [], [], []

    def flush():
        if tokens:
            sentences.append(TaggedSentence(tuple(tokens), tuple(tags), tuple(pos), tuple(chunk)))
            for part in (tokens, pos, chunk, tags):
                part.clear()

    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                flush()
                continue
            if fields[0] == "-DOCSTART-":
                flush()
                continue
            if len(fields) != 4:
                raise DataFormatError(path, line_no, f"expected 4 fields 'token POS chunk NER', found {len(fields)}: "
                                                     f"{line.rstrip()!r}")
            if allowed is not None and fields[3] not in allowed:
                raise DataFormatError(path, line_no, f"unknown NER tag {fields[3]!r}; expected one of {list(labels)}")
            tokens.append(fields[0])
            pos.append(fields[1])
            chunk.append(fields[2])
            tags.append(fields[3])
    flush()
    return sentences
