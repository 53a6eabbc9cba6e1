"""A model folder's vocabulary: its `vocab.txt`, else its Hugging Face `tokenizer.json` (transformers 5 saves no
vocab.txt), with the casing tokenizer.json states; what every place that takes a model folder reads."""

from __future__ import annotations

import os

from bert_keras.preprocessing.tokenizer_json import read_tokenizer_json
from bert_keras.preprocessing.vocab import load_vocab


class MissingVocabularyError(FileNotFoundError):
    """A model source with no vocabulary of its own (a preset, a folder with neither vocab.txt nor
    tokenizer.json) and none given. `source` and `folder` (or None) say which; the message names `vocab=`."""

    def __init__(self, source: str, folder: str | None = None):
        self.source, self.folder = source, folder
        super().__init__(self.message("vocab=\"vocab.txt\""))

    def message(self, how_to_pass: str) -> str:
        """The message, with `how_to_pass` as the way to give a vocabulary (the CLI says `--vocab vocab.txt`)."""
        if self.folder is None:
            return f"no vocabulary for {self.source}: pass {how_to_pass}"
        return (f"no vocabulary for {self.source}: {self.folder} holds neither vocab.txt nor tokenizer.json; "
                f"pass {how_to_pass} (the vocabulary it was trained with)")


def folder_vocabulary(folder: str, source: str | None = None) -> tuple[str | list[str], bool | None]:
    """The vocabulary and casing of a model folder: its `vocab.txt`, else its Hugging Face `tokenizer.json`.

    A folder that transformers 5 saves has tokenizer.json and no vocab.txt: the tokens then come from the
    WordPiece model's vocab and the casing from its normalizer (tokenizer_json.read_tokenizer_json). With both
    files, the tokens are vocab.txt's and the casing tokenizer.json's; if the two files hold different tokens,
    or tokenizer.json tokenizes in a way BertPreprocessor cannot, a ValueError says so instead of guessing.
    With vocab.txt alone the casing is None: BertPreprocessor reads it from the vocabulary.

    Args:
        folder: str. A model folder (checkpoint, Hugging Face, `bert-keras pretrain --out`, ...).
        source: str or None. The model source to name in errors (default: the folder).

    Returns:
        (vocab, lower_case): the vocab.txt path or the list of tokens in id order (both are what
        BertPreprocessor and load_vocab take); True/False from tokenizer.json, or None (read it from the tokens).

    Raises:
        MissingVocabularyError (a FileNotFoundError): the folder holds neither file.
        ValueError: tokenizer.json is not a BERT WordPiece tokenizer, or disagrees with vocab.txt.

    Example:
        >>> from bert_keras.preprocessing.folder_vocab import folder_vocabulary
        >>> vocab, lower_case = folder_vocabulary(bert_keras.loading.bundled_minilm_folder())
        >>> os.path.basename(vocab), lower_case
        ('vocab.txt', True)
    """
    vocab_file, tokenizer_file = os.path.join(folder, "vocab.txt"), os.path.join(folder, "tokenizer.json")
    if not os.path.exists(tokenizer_file):
        if not os.path.exists(vocab_file):
            raise MissingVocabularyError(source or folder, folder)
        return vocab_file, None
    tokens, lower_case = read_tokenizer_json(tokenizer_file)
    if not os.path.exists(vocab_file):
        return tokens, lower_case
    listed = load_vocab(vocab_file)
    if listed != tokens:
        first = next((i for i, (a, b) in enumerate(zip(listed, tokens)) if a != b), min(len(listed), len(tokens)))
        raise ValueError(f"{folder}: vocab.txt ({len(listed)} tokens) and tokenizer.json ({len(tokens)} tokens) "
                         f"disagree from id {first} on: remove the stale one, or pass vocab= (and lower_case=)")
    return vocab_file, lower_case
