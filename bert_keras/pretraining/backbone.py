"""The encoder a pretraining run starts from, its word table the size of the vocabulary it trains with.

A preset trained from scratch takes `vocab_size` from the vocabulary given (`bert-keras vocab --size N` writes
what its learner reaches, often fewer than N): with the preset's 30522 rows for a 1,981-token vocabulary, most
of the MLM softmax is over ids no text has, and the first MLM+NSP loss is ln 30522 + ln 2 = 11.0 instead of
ln 1981 + ln 2 = 8.3. A model with weights keeps its table, so a vocabulary of another size is refused: its ids
would index rows learnt for other tokens, or none.
"""

from __future__ import annotations

def pretraining_backbone(model: str, vocab: str | None, lower_case: bool | None, max_seq_length: int):
    """(encoder, preprocessor, note) for `pretrain --model MODEL [--vocab VOCAB]`.

    Args:
        model: a preset name (random weights), a checkpoint folder or prefix, a .keras file or a run folder, or a
            zoo name (what loading.load_backbone takes).
        vocab: vocab.txt; needed for a preset, else the model's own is used when None.
        lower_case: the casing; None reads it from the vocabulary (or the model's tokenizer).
        max_seq_length: the longest sequence the preprocessor makes.

    Returns:
        (BertEncoder, BertPreprocessor, str or None): for a preset with a vocabulary, the note that says which
        vocab_size it was built with ("bert_tiny with vocab_size 1981 from vocab.txt"); None otherwise.

    Raises:
        ValueError: a model with weights whose vocab_size is not the vocabulary's length.
        FileNotFoundError: no vocabulary for a preset, or a source that is not there (load_backbone's).

    Example:
        >>> encoder, preprocessor, note = pretraining_backbone("bert_tiny", "vocab.txt", None, 128)  # doctest: +SKIP
        >>> note                                                                                   # doctest: +SKIP
        'bert_tiny with vocab_size 1981 from vocab.txt'
    """
    from bert_keras.config import PRESETS
    from bert_keras.loading import load_backbone
    # load_backbone sizes a preset's word table to the vocabulary and refuses a model with weights whose
    # vocab_size is not the vocabulary's length (loading.check_vocab_size), before anything runs.
    encoder, preprocessor = load_backbone(model, vocab, lower_case, max_seq_length=max_seq_length)
    if model in PRESETS and vocab is not None:
        return encoder, preprocessor, f"{model} with vocab_size {encoder.config.vocab_size} from {vocab}"
    return encoder, preprocessor, None
