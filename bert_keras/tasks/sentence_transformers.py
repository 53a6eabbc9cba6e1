"""sentence-transformers folders -> BertEmbedder or BertReranker: the task models built from what
checkpoints/sentence_transformers.py reads (as tasks/huggingface.py builds from checkpoints/huggingface_tasks.py)."""

from __future__ import annotations

from bert_keras.checkpoints.sentence_transformers import read_sentence_transformer


def load_sentence_transformer(folder: str, **preprocessor_args):
    """A sentence-transformers folder as a task model: a BertEmbedder (SentenceTransformer) or a BertReranker
    (CrossEncoder), with its weights, tokenizer, max_seq_length and prompts.

    Args:
        folder: str. What `SentenceTransformer.save` or `CrossEncoder.save` wrote (either module layout).
        **preprocessor_args: passed to BertPreprocessor; max_seq_length defaults to the folder's.

    Returns:
        BertEmbedder or BertReranker, owning its preprocessor.

    Raises:
        ValueError: a module, pooling mode or activation that cannot be reproduced (named), a model that is not
            BERT, or inconsistent files.
        FileNotFoundError: a file the folder's modules.json names is missing.

    Example:
        >>> model = load_sentence_transformer(bert_keras.loading.bundled_minilm_folder())      # doctest: +SKIP
        >>> model.encode(["a fine film"]).shape                                               # doctest: +SKIP
        (1, 384)
    """
    spec = read_sentence_transformer(folder)
    if spec.max_seq_length:
        preprocessor_args.setdefault("max_seq_length", spec.max_seq_length)
    if spec.kind == "CrossEncoder":
        return _cross_encoder(folder, spec, preprocessor_args)
    from bert_keras.checkpoints.load import pooler_unused
    from bert_keras.loading import load_backbone
    from bert_keras.tasks.embedder import BertEmbedder
    lower_case = preprocessor_args.pop("lower_case", spec.lower_case)
    with pooler_unused():                  # an embedder pools token vectors: the pooler is never read
        encoder, preprocessor = load_backbone(spec.transformer, lower_case=lower_case, **preprocessor_args)
    model = BertEmbedder(encoder, pooling=spec.pooling, include_prompt=spec.include_prompt,
                         dense=[d for d, _, _ in spec.dense], normalize=spec.normalize, prompts=spec.prompts,
                         default_prompt_name=spec.default_prompt_name, similarity_fn_name=spec.similarity_fn_name,
                         preprocessor=preprocessor)
    for i, (_, kernel, bias) in enumerate(spec.dense):
        layer = model.get_layer(f"dense_{i}")
        if layer.kernel.shape != kernel.shape:
            raise ValueError(f"{folder}: Dense {i} takes {kernel.shape[0]} inputs; the layer before gives "
                             f"{layer.kernel.shape[0]}")
        layer.set_weights([kernel] + ([bias] if bias is not None else []))
    return model


def _cross_encoder(folder: str, spec, preprocessor_args: dict):
    from bert_keras.tasks.huggingface import from_huggingface
    from bert_keras.tasks.reranker import BertReranker
    classifier = from_huggingface(folder, **preprocessor_args)
    if classifier.output.shape[-1] != 1:
        raise ValueError(f"{folder}: a CrossEncoder of {classifier.output.shape[-1]} labels; a reranker here has one")
    model = BertReranker(classifier.encoder, score_activation=spec.activation,
                         dropout=classifier._task_args["dropout"], preprocessor=classifier.preprocessor)
    model.get_layer("logits").set_weights(classifier.get_layer("logits").get_weights())
    return model
