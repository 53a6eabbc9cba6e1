"""WordPiece vocabularies: read, check against the casing they are used with, and build from a corpus."""

from __future__ import annotations

import os

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocab(vocab) -> list[str]:
    """A vocab.txt path (one token per line, id = line number) or a list of tokens -> list of tokens."""
    if isinstance(vocab, (list, tuple)):
        tokens = [str(t) for t in vocab]
    else:
        if not os.path.exists(vocab):
            raise FileNotFoundError(f"vocabulary file {vocab} not found (a BERT vocab.txt, one token per line)")
        from bert_keras.data.text_files import read_text       # UTF-8, a bad byte named (line, byte offset)
        tokens = read_text(vocab).splitlines()
    missing = [t for t in SPECIAL_TOKENS if t not in tokens]
    if missing:
        raise ValueError(f"the vocabulary lacks the special tokens {missing}: not a BERT WordPiece vocabulary")
    if len(set(tokens)) != len(tokens):
        duplicated = sorted({t for t in tokens if tokens.count(t) > 1})[:5]
        raise ValueError(f"the vocabulary repeats tokens {duplicated}: ids would be ambiguous")
    return tokens


def save_vocab(vocab, path: str) -> str:
    """Writes a vocabulary as `vocab.txt` (one token per line, id = line number), atomically.

    Args:
        vocab: str or list of str. A vocab.txt path (copied) or the tokens in id order.
        path: str. The file to write.

    Returns:
        str: `path`.

    Example:
        >>> from bert_keras.preprocessing.vocab import save_vocab
        >>> save_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"], "small/vocab.txt")
        'small/vocab.txt'
    """
    from bert_keras.atomic import atomic_file
    tokens = load_vocab(vocab)
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return path


def vocab_is_cased(tokens: list[str]) -> bool:
    """True when ordinary (non-[special]) tokens have upper-case letters: uncased vocabularies have none."""
    lowered = "\n".join(tokens).lower().split("\n")           # one lower() call, not one a token
    upper = sum(1 for t, low in zip(tokens, lowered) if t != low and not (t.startswith("[") and t.endswith("]")))
    return upper > 0.01 * len(tokens)


def check_casing(tokens: list[str], lower_case: bool) -> None:
    """A cased vocabulary with lower_case=True (or the reverse) silently maps words to the wrong ids: refuse."""
    cased = vocab_is_cased(tokens)
    if cased and lower_case:
        raise ValueError("this vocabulary is cased (it has upper-case tokens) but lower_case=True: lower-cased "
                         "text would never reach them. Use lower_case=False with a cased checkpoint.")
    if not cased and not lower_case:
        raise ValueError("this vocabulary is uncased (no upper-case tokens) but lower_case=False: capitalised "
                         "words would become [UNK]. Use lower_case=True with an uncased checkpoint.")


def build_vocab(files: list[str], vocab_size: int = 30522, lower_case: bool = True, out: str | None = None,
                reserved_tokens=SPECIAL_TOKENS) -> list[str]:
    """A WordPiece vocabulary learned from text files with TF.Text's BERT vocab tool (bert_vocab_from_dataset),
    on words split and normalised by the same basic tokenization the model uses. The files are read as UTF-8
    (a byte that is not is a DataFormatError naming file, line and byte offset); files without a word are a
    ValueError.

    TF.Text's learner reaches `vocab_size` only roughly: its search over count thresholds stops at the nearest
    size it finds (within its slack_ratio, 5% under), so the returned list may be a little shorter; the caller says how many were written. It can never be shorter than the corpus' alphabet (the
    special tokens and every character alone and as "##" continuation), and where its search ends above
    `vocab_size` the vocabulary is refused, and nothing is written.

    Raises:
        ValueError: no words in the files, or the learner's nearest vocabulary is larger than `vocab_size` (the
            message gives its size)."""
    import tensorflow as tf
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as bert_vocab

    from bert_keras.atomic import atomic_file
    from bert_keras.data.text_files import check_utf8
    from bert_keras.preprocessing.normalize import normalize_characters, split_words_with_offsets
    for file in files:
        check_utf8(file)
    if all("://" not in file and not os.path.getsize(file) for file in files):      # empty local files: at once
        raise ValueError(f"no words in {', '.join(map(str, files))}: give text files, one sentence or paragraph "
                         "a line")

    def words(line):
        pieces = split_words_with_offsets(line[None], lower_case)[0].flat_values
        chars = tf.strings.unicode_split(pieces, "UTF-8", errors="replace")
        return tf.strings.reduce_join(chars.with_flat_values(normalize_characters(chars.flat_values, lower_case)),
                                      axis=1)

    lines = tf.data.TextLineDataset(files).filter(lambda s: tf.strings.length(s) > 0)
    dataset = lines.map(words, num_parallel_calls=tf.data.AUTOTUNE).unbatch().filter(
        lambda w: tf.strings.length(w) > 0).batch(4096)
    try:
        tokens = bert_vocab.bert_vocab_from_dataset(
            dataset, vocab_size=vocab_size, reserved_tokens=list(reserved_tokens),
            bert_tokenizer_params={"lower_case": False}, learn_params={})
    except StopIteration:                     # the tool's first batch: there is none
        raise ValueError(f"no words in {', '.join(map(str, files))}: give text files, one sentence or paragraph "
                         "a line") from None
    if len(tokens) > vocab_size:
        raise ValueError(f"TF.Text's learner cannot make {vocab_size:,} tokens of this corpus: its nearest "
                         f"vocabulary has {len(tokens):,} (it always keeps the {len(reserved_tokens)} special tokens "
                         f"and each character alone and as ##): give a size of {len(tokens):,} or more")
    if out:
        with atomic_file(out) as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(tokens) + "\n")
    return tokens
