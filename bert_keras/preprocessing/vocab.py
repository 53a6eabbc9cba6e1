"""WordPiece vocabularies: read, check against the casing they are used with, and build from a corpus."""

from __future__ import annotations

import os
import re
from collections import Counter

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocab(vocab) -> list[str]:
    """A vocab.txt path (one token per line, id = line number) or a list of tokens -> list of tokens.

    Refused, with one line naming the first offence: a path that is a folder, a blank line or a token holding a
    control character (a NUL byte, a tab, ...: TF.Text cannot build its WordPiece trie from it), a vocabulary
    without BERT's special tokens, a repeated token (its ids would be ambiguous).

    Args:
        vocab: str or list of str. A vocab.txt path, or the tokens in id order.

    Returns:
        list of str: the tokens, id = position.

    Raises:
        FileNotFoundError: no such file.
        ValueError: one of the cases above (a DataFormatError naming the line, for a file).

    Example:
        >>> load_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"])[-1]
        'hello'
    """
    if isinstance(vocab, (list, tuple)):
        tokens, source = [str(t) for t in vocab], None
    else:
        if not os.path.exists(vocab):
            raise FileNotFoundError(f"vocabulary file {vocab} not found (a BERT vocab.txt, one token per line)")
        if os.path.isdir(vocab):
            raise ValueError(f"vocabulary {vocab} is a folder: give its vocab.txt (a BERT vocab.txt, one token "
                             "per line)")
        from bert_keras.data.text_files import read_text       # UTF-8, a bad byte named (line, byte offset)
        tokens, source = _lines(read_text(vocab)), vocab
    _check_tokens(tokens, source)
    missing = [t for t in SPECIAL_TOKENS if t not in tokens]
    if missing:
        raise ValueError(f"the vocabulary lacks the special tokens {missing}: not a BERT WordPiece vocabulary")
    if all(t.startswith("[") and t.endswith("]") for t in tokens):
        raise ValueError(f"the vocabulary{'' if source is None else ' ' + str(source)} holds only special tokens "
                         f"({len(tokens)}): no word pieces to split text into; give a BERT vocab.txt (bert-keras "
                         "vocab makes one from a corpus)")
    counts = Counter(tokens)                                   # one pass: tokens.count(t) each was O(n^2)
    if len(counts) != len(tokens):
        seen = set()
        first = next(i for i, t in enumerate(tokens) if t in seen or seen.add(t))      # the first repeat's id
        earlier = tokens.index(tokens[first])
        where = (lambda i: f"line {i + 1}") if source else (lambda i: f"id {i}")
        raise ValueError(f"the vocabulary{'' if source is None else ' ' + str(source)} repeats "
                         f"{len(tokens) - len(counts)} token(s), the first {tokens[first]!r} at {where(first)} "
                         f"(also {where(earlier)}): ids would be ambiguous; give each token once, one a line")
    return tokens


def _lines(text: str) -> list[str]:
    """A vocab.txt's tokens: split on newlines only (str.splitlines would also split on \\x0b, \\x1c, \\x85,
    U+2028 ..., and move every later id), a CRLF's \\r dropped, the final newline ending the last line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


MAX_TOKEN_BYTES = 256          # TF Text's FastWordpieceTokenizer refuses a longer token (RuntimeError)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _check_tokens(tokens: list[str], source) -> None:
    """A blank line or a control character in a token is refused, naming the first one's line (or id)."""
    from bert_keras.data.errors import DataFormatError
    for i, token in enumerate(tokens):
        bad = _CONTROL.search(token) if token else None
        long = len(token) > MAX_TOKEN_BYTES // 4 and len(token.removeprefix("##").encode("utf-8")) > MAX_TOKEN_BYTES
        if token and bad is None and not long:
            continue
        if not token:
            problem = "a blank line: every line of a vocab.txt is one token (its id is the line number - 1)"
        elif bad is not None:
            problem = (f"token {token!r} holds the control character U+{ord(bad.group()):04X}: a vocabulary's "
                       "tokens are printable text")
        else:
            problem = (f"a token of {len(token.encode('utf-8')):,} bytes ({token[:20]!r}...): TF Text's WordPiece "
                       f"takes tokens of at most {MAX_TOKEN_BYTES} bytes (after a leading ##)")
        if source is None:
            raise ValueError(f"vocabulary token id {i}: {problem}")
        raise DataFormatError(source, i + 1, problem + "; remove or fix that line")


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
