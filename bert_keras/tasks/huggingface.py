"""Our task models from Hugging Face task folders, and back: a model fine-tuned in PyTorch opens here with its
head, labels and tokenizer (so it exports for TF Serving with raw text in), and ours save as folders that
transformers' `AutoModelFor...` classes and pipelines load. The names are checkpoints/huggingface_tasks.py's:

  BertForSequenceClassification  <->  BertClassifier (single-label, multi-label or regression, by problem_type)
  BertForTokenClassification     <->  BertTagger
  BertForQuestionAnswering       <->  BertSpanLabeler
  BertForMultipleChoice          <->  BertMultipleChoice
"""

from __future__ import annotations

import os

from bert_keras.checkpoints.huggingface_tasks import (BY_TASK_CLASS, MULTI_LABEL, REGRESSION, SINGLE_LABEL, TaskHead,
                                                      read_config, read_task_head, task_names)

SPAN_WINDOW = 384        # transformers' question-answering pipeline's max_seq_len (and run_squad.py's)


def is_huggingface_task_folder(path: str) -> bool:
    """Is `path` a folder transformers saved for one of the four task architectures?"""
    return task_names(path) is not None


def from_huggingface(folder: str, **preprocessor_args):
    """The task model of a Hugging Face task folder: encoder, head and labels from its weights and config.json,
    the preprocessor from its vocabulary (vocab.txt, or the tokenizer.json transformers 5 saves) and casing.

    Windows are at most 512 tokens (384 for question answering, as transformers' pipeline) and never more than
    the model's positions. A token or span model has no pooler in the folder: the encoder's keeps its initial
    weights, which those heads never read. A sequence classifier's kind is config.json's `problem_type`.

    Args:
        folder: str. What `save_pretrained` wrote for a BertForSequenceClassification, BertForTokenClassification,
            BertForQuestionAnswering or BertForMultipleChoice (and its tokenizer).
        **preprocessor_args: passed to BertPreprocessor (seq_length, max_seq_length, ...).

    Returns:
        BertClassifier, BertTagger, BertSpanLabeler or BertMultipleChoice, owning its preprocessor.

    Raises:
        ValueError: not a task folder, or the head does not fit config.json.
        FileNotFoundError: no vocabulary in the folder.

    Example:
        >>> tagger = bert_keras.tasks.BertTagger(bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")),
        ...                                      label_names=["O", "B-PER", "I-PER"],
        ...                                      preprocessor=bert_keras.BertPreprocessor("vocab.txt"))
        >>> _ = bert_keras.tasks.save_huggingface(tagger, "hf_tagger")       # as BertForTokenClassification
        >>> model = bert_keras.tasks.from_huggingface("hf_tagger")
        >>> type(model).__name__, model.label_names, model.preprocessor.max_seq_length
        ('BertTagger', ['O', 'B-PER', 'I-PER'], 512)
    """
    from bert_keras.loading import load_backbone
    from bert_keras.tasks import BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTagger
    head = read_task_head(folder)
    positions = int(read_config(folder).get("max_position_embeddings", 512))
    window = SPAN_WINDOW if head.names.task_class == "BertSpanLabeler" else 512
    preprocessor_args.setdefault("max_seq_length", min(window, positions))
    encoder, preprocessor = load_backbone(folder, **preprocessor_args)
    outputs = int(head.bias.shape[0])
    if head.names.task_class == "BertClassifier":
        model = BertClassifier(encoder, outputs, dropout=head.dropout, label_names=head.label_names,
                               preprocessor=preprocessor, multi_label=head.problem_type == MULTI_LABEL)
    elif head.names.task_class == "BertTagger":
        model = BertTagger(encoder, outputs, dropout=head.dropout, label_names=head.label_names,
                           preprocessor=preprocessor)
    elif head.names.task_class == "BertSpanLabeler":
        model = BertSpanLabeler(encoder, preprocessor)
    else:
        model = BertMultipleChoice(encoder, dropout=head.dropout, preprocessor=preprocessor)
    assign_head(model, head, f"head of {folder}")
    return model


def head_variables(model) -> dict:
    """{"kernel", "bias"}: the variables of a task model's head layer (huggingface_tasks.HEADS names it)."""
    names = BY_TASK_CLASS.get(type(model).__name__)
    if names is None:
        raise TypeError(f"a {type(model).__name__} has no Hugging Face task architecture (a BertClassifier, "
                        f"BertTagger, BertSpanLabeler or BertMultipleChoice has)")
    layer = model.get_layer(names.layer)
    return {"kernel": layer.kernel, "bias": layer.bias}


def assign_head(model, head: TaskHead, what: str) -> None:
    """Gives the task model's head layer the TaskHead's kernel and bias (a mis-shaped one is named)."""
    from bert_keras.checkpoints.names import assign_named
    assign_named(head_variables(model), {"kernel": head.kernel, "bias": head.bias}, what)


def task_head(model) -> TaskHead:
    """A task model's head as a huggingface_tasks.TaskHead: weights, labels, problem_type, dropout."""
    variables = head_variables(model)
    names = BY_TASK_CLASS[type(model).__name__]
    args = model.get_config()
    head = TaskHead(names, variables["kernel"].numpy(), variables["bias"].numpy(),
                    dropout=float(args.get("dropout", 0.1)))
    if names.task_class in ("BertClassifier", "BertTagger"):
        head.label_names = list(model.label_names)
    if names.task_class == "BertClassifier":
        head.problem_type = REGRESSION if model.regression else MULTI_LABEL if model.multi_label else SINGLE_LABEL
    return head


def save_huggingface(model, folder: str) -> str:
    """Writes a task model as a Hugging Face folder: model.safetensors with the head, config.json (architectures,
    id2label/label2id, problem_type), vocab.txt, tokenizer.json and tokenizer_config.json (do_lower_case), so
    `AutoModelFor...` and transformers' pipelines load it and answer as the model does. Atomic.

    Args:
        model: a BertClassifier, BertTagger, BertSpanLabeler or BertMultipleChoice with its preprocessor.
        folder: str. The folder to write (replaced if it exists).

    Returns:
        str, the folder.

    Raises:
        TypeError: another kind of model.
        ValueError: a model without a preprocessor (no vocabulary to write).

    Example:
        >>> model = bert_keras.tasks.BertClassifier(
        ...     bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")), 2,
        ...     label_names=["negative", "positive"], preprocessor=bert_keras.BertPreprocessor("vocab.txt"))
        >>> _ = bert_keras.tasks.save_huggingface(model, "hf_sst2")
        >>> sorted(os.listdir("hf_sst2"))
        ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json', 'vocab.txt']
        >>> transformers.pipeline("text-classification", model="hf_sst2")("a gorgeous film")  # doctest: +SKIP
        [{'label': 'positive', 'score': 0.52}]
    """
    from bert_keras.checkpoints.huggingface import write_huggingface
    from bert_keras.checkpoints.names import encoder_weights
    head = task_head(model)
    pre = model.require_preprocessor()
    return write_huggingface(encoder_weights(model.encoder), os.fspath(folder), model.encoder.config,
                             vocab_file=list(pre.vocab), task_head=head, lower_case=pre.lower_case)
