"""Hugging Face BERT folders (`config.json` + `model.safetensors`), read with safetensors' numpy API: no torch.

HF names are PyTorch module paths (`encoder.layer.0.attention.self.query.weight`, optionally under `bert.`);
torch Linear weights are [out, in], so kernels are transposed to TF's [in, out]. A task model's head
(`classifier.*`, `qa_outputs.*`: huggingface_tasks.py) is not the encoder's: the reader leaves it out and the
writer adds it when given one.
"""

from __future__ import annotations

import os
import re

from safetensors.numpy import load_file

from bert_keras.checkpoints.huggingface_tasks import is_head_weight

_RENAMES = [  # (HF pattern, google name), applied after the `bert.` prefix is removed
    (r"embeddings\.word_embeddings\.weight", "bert/embeddings/word_embeddings"),
    (r"embeddings\.position_embeddings\.weight", "bert/embeddings/position_embeddings"),
    (r"embeddings\.token_type_embeddings\.weight", "bert/embeddings/token_type_embeddings"),
    (r"embeddings\.LayerNorm\.(weight|gamma)", "bert/embeddings/LayerNorm/gamma"),
    (r"embeddings\.LayerNorm\.(bias|beta)", "bert/embeddings/LayerNorm/beta"),
    (r"encoder\.layer\.(\d+)\.(.+)\.LayerNorm\.(weight|gamma)", r"bert/encoder/layer_\1/\2/LayerNorm/gamma"),
    (r"encoder\.layer\.(\d+)\.(.+)\.LayerNorm\.(bias|beta)", r"bert/encoder/layer_\1/\2/LayerNorm/beta"),
    (r"encoder\.layer\.(\d+)\.(.+)\.weight", r"bert/encoder/layer_\1/\2/kernel"),
    (r"encoder\.layer\.(\d+)\.(.+)\.bias", r"bert/encoder/layer_\1/\2/bias"),
    (r"pooler\.dense\.weight", "bert/pooler/dense/kernel"),
    (r"pooler\.dense\.bias", "bert/pooler/dense/bias"),
    (r"cls\.predictions\.transform\.dense\.weight", "cls/predictions/transform/dense/kernel"),
    (r"cls\.predictions\.transform\.dense\.bias", "cls/predictions/transform/dense/bias"),
    (r"cls\.predictions\.transform\.LayerNorm\.(weight|gamma)", "cls/predictions/transform/LayerNorm/gamma"),
    (r"cls\.predictions\.transform\.LayerNorm\.(bias|beta)", "cls/predictions/transform/LayerNorm/beta"),
    (r"cls\.predictions\.bias", "cls/predictions/output_bias"),
    (r"cls\.seq_relationship\.weight", "cls/seq_relationship/output_weights"),   # [2, H] in both
    (r"cls\.seq_relationship\.bias", "cls/seq_relationship/output_bias"),
]
# Buffers and tied copies that carry no weights of their own.
_IGNORED = re.compile(r"(.*position_ids|cls\.predictions\.decoder\.(weight|bias))$")


def google_name(hf_name: str) -> str | None:
    """A Hugging Face weight name (`bert.encoder.layer.0.attention.self.query.weight`) -> google-research's
    (`bert/encoder/layer_0/attention/self/query/kernel`), or None for a name BERT's encoder does not have."""
    name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
    for pattern, target in _RENAMES:
        if re.fullmatch(pattern, name):
            return re.sub(pattern, target, name).replace(".", "/")
    return None


def read_safetensors(path: str) -> dict:
    """{name: NumPy array} of a .safetensors file; a damaged or truncated file is a ValueError saying so."""
    from safetensors import SafetensorError
    try:
        return load_file(path)
    except SafetensorError as e:
        raise ValueError(f"{path} cannot be read ({e}): the file is damaged or cut short (an interrupted download "
                         "or copy?); fetch it again") from None


def read_huggingface(folder: str) -> dict:
    """{google name: array} from `folder/model.safetensors`; unknown names fail with their names. A task head
    (BertForSequenceClassification's `classifier.*`, ...) is left out: huggingface_tasks.read_task_head reads it."""
    path = os.path.join(folder, "model.safetensors")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found: a Hugging Face folder needs model.safetensors "
                                "(convert a pytorch_model.bin with transformers' save_pretrained first).")
    tensors, unknown = {}, []
    for hf_name, value in read_safetensors(path).items():
        if _IGNORED.fullmatch(hf_name) or is_head_weight(hf_name):
            continue
        name = google_name(hf_name)
        if name is None:
            unknown.append(hf_name)
            continue
        transpose = name.endswith("/kernel")
        tensors[name] = value.T if transpose else value
    if unknown:
        raise ValueError(f"{path} has weights that are not BERT's: {', '.join(sorted(unknown)[:8])}")
    return tensors


def huggingface_name(name: str) -> str:
    """google-research's name -> the Hugging Face one `google_name` maps back to it
    (`bert/encoder/layer_0/output/dense/kernel` -> `bert.encoder.layer.0.output.dense.weight`)."""
    special = {"cls/predictions/output_bias": "cls.predictions.bias",
               "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
               "cls/seq_relationship/output_bias": "cls.seq_relationship.bias"}
    if name in special:
        return special[name]
    hf = re.sub(r"layer_(\d+)", r"layer.\1", name).replace("/", ".")
    hf = re.sub(r"\.(kernel|gamma)$", ".weight", hf)
    hf = re.sub(r"\.beta$", ".bias", hf)
    if re.fullmatch(r"bert\.embeddings\.\w+_embeddings", hf):
        hf += ".weight"
    return hf


def write_huggingface(tensors: dict, folder: str, config, vocab_file=None, task_head=None,
                      lower_case: bool | None = None) -> str:
    """Writes {google name: array} as a Hugging Face BERT folder transformers loads: model.safetensors (kernels
    transposed to torch's [out, in]), config.json and the tokenizer; atomically (temporary folder, then rename).
    With the `cls/predictions/*` head it is a `BertForMaskedLM`, with NSP too a `BertForPreTraining`; with a
    `task_head` the task model it names (`AutoModelForSequenceClassification` & co. and pipelines load it).

    Args:
        tensors: {google-research name: NumPy array} (`encoder_weights(encoder)` plus heads).
        folder: str. The folder to write (replaced if it exists).
        config: BertConfig.
        vocab_file: str, list of str, or None. A vocab.txt, or the tokens in id order: the folder gets
            vocab.txt, tokenizer.json and tokenizer_config.json (do_lower_case; transformers' tokenizer).
        task_head: huggingface_tasks.TaskHead or None. A task model's head: its weights, architecture, labels
            and problem_type go into the folder (the pooler is left out for the architectures that have none).
        lower_case: bool or None. The tokenizer's casing; None reads it from the vocabulary.

    Returns:
        str, the folder.

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> from bert_keras.checkpoints.names import encoder_weights
        >>> _ = write_huggingface(encoder_weights(encoder), "hf_tiny", encoder.config)
        >>> sorted(os.listdir("hf_tiny"))
        ['config.json', 'model.safetensors']
    """
    import json

    import numpy as np
    from safetensors.numpy import save_file

    from bert_keras.atomic import atomic_directory
    from bert_keras.checkpoints.names import POOLER_NAMES
    if task_head is not None and not task_head.names.pooler:
        tensors = {k: v for k, v in tensors.items() if k not in POOLER_NAMES}
    out = {}
    for name, value in tensors.items():
        hf = huggingface_name(name)
        if google_name(hf) != name:
            raise ValueError(f"{name} has no Hugging Face BERT name")
        out[hf] = np.ascontiguousarray(np.asarray(value).T if name.endswith("/kernel") else np.asarray(value))
    heads = {n.split("/")[1] for n in tensors if n.startswith("cls/")}
    architecture = {"predictions": "BertForMaskedLM", "seq_relationship": "BertForNextSentencePrediction"}
    architectures = (["BertForPreTraining"] if heads == {"predictions", "seq_relationship"}
                     else [architecture[h] for h in heads] or ["BertModel"])
    if task_head is not None:
        out.update(task_head.huggingface_weights())
    entries = task_head.config_entries() if task_head is not None else {"architectures": architectures}
    with atomic_directory(folder) as tmp:
        save_file(out, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
            json.dump({**config.to_dict(), "model_type": "bert", "tie_word_embeddings": True, **entries}, f,
                      indent=2, sort_keys=True)
        if vocab_file is not None:        # vocab.txt, and the tokenizer.json (+ casing) transformers 5 reads
            from bert_keras.preprocessing.tokenizer_json import write_tokenizer_config, write_tokenizer_json
            from bert_keras.preprocessing.vocab import load_vocab, save_vocab, vocab_is_cased
            tokens = load_vocab(vocab_file)
            lower_case = not vocab_is_cased(tokens) if lower_case is None else bool(lower_case)
            save_vocab(tokens, os.path.join(tmp, "vocab.txt"))
            write_tokenizer_json(tokens, lower_case, os.path.join(tmp, "tokenizer.json"))
            write_tokenizer_config(lower_case, os.path.join(tmp, "tokenizer_config.json"),
                                   model_max_length=config.max_position_embeddings)
    return folder
