"""Open a fine-tuned task model from its one file (or its `bert-keras finetune --out` folder), or from a Hugging
Face task folder (a BertForSequenceClassification & co. fine-tuned in PyTorch: tasks/huggingface.py), or a fine-tuned
classifier's TF checkpoint (google-research run_classifier.py's, or a Model Garden BertClassifier's).

Models written before task models owned their preprocessor (bert_keras <= 0.1.0: model.keras took ids, with
vocab.txt, preprocessing.json and task.json beside it) are upgraded on load: the side files become the model's
preprocessor and task settings, the weights are copied, and `save` writes the one-file form.
"""

from __future__ import annotations

import inspect
import json
import os

import keras


def load_task_model(path: str):
    """Opens a fine-tuned task model from its `.keras` file, its `bert-keras finetune --out` folder, or a Hugging
    Face task folder (what transformers' `save_pretrained` writes for a BertForSequenceClassification,
    BertForTokenClassification, BertForQuestionAnswering or BertForMultipleChoice, with its tokenizer), or a
    fine-tuned classifier's TF checkpoint folder or prefix (google-research run_classifier.py's `output_weights`,
    or a Model Garden BertClassifier's), with bert_config.json and vocab.txt beside it: a BertClassifier whose
    labels are "0", "1", ... (the checkpoint does not name them). A sentence-transformers folder opens as a
    BertEmbedder (a SentenceTransformer) or a BertReranker (a CrossEncoder).

    The model carries its preprocessor, so it takes raw text at once (`classify`, `answer`, `choose`,
    `entities`). A model written by bert_keras <= 0.1.0 (ids only, with vocab.txt, preprocessing.json and
    task.json beside it) is upgraded on load; `save` then writes the one-file form.

    Args:
        path: str. A `.keras` file, a folder holding `model.keras`, a Hugging Face task folder, a
            sentence-transformers folder, or a classifier checkpoint.

    Returns:
        The task model (BertClassifier, BertSpanLabeler, BertMultipleChoice, BertTagger, BertEmbedder or
        BertReranker).

    Raises:
        FileNotFoundError: no model at `path`.
        TypeError: the file holds something else (e.g. a bare encoder).
        ValueError: an old ids-only model without its side files.

    Example:
        >>> model = bert_keras.tasks.BertClassifier(
        ...     bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")), 2,
        ...     label_names=["negative", "positive"], preprocessor=bert_keras.BertPreprocessor("vocab.txt"))
        >>> model.save("sentiment.keras")
        >>> loaded = bert_keras.load_task_model("sentiment.keras")
        >>> loaded.label_names, loaded.classify(["fine"])[0]["label"] == model.classify(["fine"])[0]["label"]
        (['negative', 'positive'], True)
    """
    import bert_keras.tasks  # noqa: F401  (registers the classes for load_model)
    from bert_keras.tasks.base import TaskModel
    from bert_keras.storage import local_copy
    from bert_keras.tasks.huggingface import from_huggingface, is_huggingface_task_folder
    path = local_copy(path)                      # a model on a bucket (gs://...): read from a local copy
    file = os.path.join(path, "model.keras") if os.path.isdir(path) else path
    from bert_keras.checkpoints.sentence_transformers import is_sentence_transformers_folder
    if not os.path.exists(file) and is_sentence_transformers_folder(path):     # before the HF task check: a
        from bert_keras.tasks.sentence_transformers import load_sentence_transformer   # CrossEncoder is both
        return load_sentence_transformer(path)
    if not os.path.exists(file) and is_huggingface_task_folder(path):
        return from_huggingface(path)
    if not os.path.exists(file):
        from bert_keras.checkpoints.load import has_classifier_head
        if has_classifier_head(path):
            return classifier_from_checkpoint(path)
    if not os.path.exists(file):
        raise FileNotFoundError(f"no model at {path}: give a .keras file, a `bert-keras finetune --out` folder or "
                                "a Hugging Face task folder (BertForSequenceClassification, "
                                "BertForTokenClassification, BertForQuestionAnswering, BertForMultipleChoice)")
    from bert_keras.model_files import load_model_file
    model = load_model_file(file)                 # a damaged or cut-short file: ValueError naming it
    if not isinstance(model, TaskModel):
        raise TypeError(f"{file} holds a {type(model).__name__}, not a fine-tuned task model (BertClassifier, "
                        "BertSpanLabeler, BertMultipleChoice, BertTagger): run `bert-keras finetune` first")
    if model.preprocessor is None:
        model = _upgrade(model, os.path.dirname(os.path.abspath(file)))
    return model


def classifier_from_checkpoint(path: str):
    """A BertClassifier from a fine-tuned classifier's TF checkpoint (see `load_task_model`): the encoder, the
    head (`output_weights` [C, H], `output_bias` [C]) and the preprocessor of the vocabulary beside it."""
    from bert_keras.checkpoints.names import assign_named
    from bert_keras.loading import load_backbone_and_heads
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.tasks import BertClassifier
    encoder, preprocessor, heads = load_backbone_and_heads(path)
    preprocessor = BertPreprocessor(preprocessor.vocab, lower_case=preprocessor.lower_case,
                                    max_seq_length=min(512, encoder.config.max_position_embeddings))
    weights = heads["output_weights"]
    model = BertClassifier(encoder, weights.shape[0], preprocessor=preprocessor)
    layer = model.get_layer("logits")
    assign_named({"kernel": layer.kernel, "bias": layer.bias},
                 {"kernel": weights.T, "bias": heads["output_bias"]}, f"classifier head of {path}")
    return model


def _upgrade(model, folder: str):
    from bert_keras.preprocessing import BertPreprocessor
    vocab, settings = os.path.join(folder, "vocab.txt"), os.path.join(folder, "preprocessing.json")
    if not (os.path.exists(vocab) and os.path.exists(settings)):
        raise ValueError(f"{folder}/model.keras takes ids and has no vocab.txt + preprocessing.json beside it "
                         "(written by an older bert_keras): put the vocab.txt and preprocessing.json of its run "
                         "beside it, or rebuild it with `bert-keras finetune`")
    with open(settings, encoding="utf-8") as f:
        preprocessor = BertPreprocessor(vocab, **json.load(f))
    info = {}
    if os.path.exists(os.path.join(folder, "task.json")):
        with open(os.path.join(folder, "task.json"), encoding="utf-8") as f:
            info = json.load(f)
    if "labels" in info:
        info["label_names"] = info.pop("labels")
    accepted = inspect.signature(type(model).__init__).parameters
    return model.with_preprocessor(preprocessor, **{k: v for k, v in info.items() if k in accepted})
