"""Fill in the blank: BERT's masked-LM head on an encoder, as people first try a pretrained BERT.

The head (MaskedLMHead) is the one pretraining trains (google-research's `cls/predictions/*`): gather the masked
positions, dense + activation + LayerNorm, then logits against the word-embedding matrix (tied) plus a bias.
BertMaskedLM wraps it with the preprocessor, so raw text in: every literal "[MASK]" in a text becomes the mask id
(as transformers' tokenizer does; the other special-token strings stay plain text, see wordpiece.py), and
`fill_mask` answers with the top-k tokens at each mask, left to right.
Shapes: ids [B, S]; masked_lm_positions [B, P] (0-padded); logits [B, P, V].
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from bert_keras.checkpoints.names import MLM_HEAD_NAMES, assign_named
from bert_keras.encoder import INPUT_NAMES
from bert_keras.layers import activation_fn
from bert_keras.tasks.base import TaskModel, id_inputs

MASK = "[MASK]"


@keras.saving.register_keras_serializable(package="bert_keras")
class MaskedLMHead(keras.layers.Layer):
    """BERT's masked-LM head: (sequence [B, S, H], positions [B, P]) -> logits [B, P, V].

    Gathers the masked positions, applies dense + activation + LayerNorm ("transform"), and scores against the
    word-embedding matrix (tied weights, as google-research/bert) plus an output bias. Hyper-parameters after
    `embedding_layer` are keyword-only.

    Args:
        embedding_layer: keras.layers.Embedding. The encoder's word table [V, H], shared as the output weights.
        hidden_act: str. The transform's activation ("gelu" is the exact erf form).
        initializer_range: float. Standard deviation of the transform's truncated-normal kernel.
        layer_norm_eps: float. The transform's LayerNorm epsilon.
        **kwargs: Keras layer arguments (name, ...).

    Call arguments:
        sequence: [B, S, H] the encoder's sequence_output.
        positions: [B, P] int32 positions to predict (0-padded).

    Returns:
        [B, P, V] float32 logits.

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> head = bert_keras.tasks.masked_lm.MaskedLMHead(encoder.embeddings.word_embeddings)
        >>> sequence = np.zeros((2, 8, 128), "float32")
        >>> tuple(head(sequence, np.array([[1, 3], [2, 0]], "int32")).shape)
        (2, 2, 30522)
    """

    def __init__(self, embedding_layer, *, hidden_act="gelu", initializer_range=0.02, layer_norm_eps=1e-12,
                 **kwargs):
        super().__init__(**kwargs)
        self.embedding_layer = embedding_layer
        hidden = embedding_layer.output_dim
        self.transform = keras.layers.Dense(hidden, activation=activation_fn(hidden_act), name="transform",
                                            kernel_initializer=keras.initializers.TruncatedNormal(
                                                stddev=initializer_range))
        self.layer_norm = keras.layers.LayerNormalization(epsilon=layer_norm_eps, name="layer_norm",
                                                          dtype="float32")

    def build(self, sequence_shape, positions_shape=None):
        hidden = self.embedding_layer.output_dim
        self.transform.build((None, None, hidden))
        self.layer_norm.build((None, None, hidden))
        self.output_bias = self.add_weight(shape=(self.embedding_layer.input_dim,), initializer="zeros",
                                           name="output_bias")
        self.built = True

    def call(self, sequence, positions):
        gathered = ops.take_along_axis(sequence, ops.expand_dims(ops.cast(positions, "int32"), -1), axis=1)
        x = self.layer_norm(self.transform(gathered))
        table = ops.cast(self.embedding_layer.embeddings, x.dtype)
        return ops.cast(ops.matmul(x, ops.transpose(table)), "float32") + self.output_bias

    def checkpoint_variables(self) -> dict:
        """{google-research name (`cls/predictions/...`): variable}, the names every checkpoint reader gives."""
        return dict(zip(MLM_HEAD_NAMES, (self.transform.kernel, self.transform.bias, self.layer_norm.gamma,
                                         self.layer_norm.beta, self.output_bias)))


def tokenize_keeping_masks(tokenize, text, mask_id: int):
    """[B] strings -> RaggedTensor [B, (tokens)] int32 ids in which every literal "[MASK]" is `mask_id`.

    The text is cut at each "[MASK]" (k masks give k + 1 parts, some maybe empty), each part is tokenized as
    usual (so "[SEP]" and other special-token strings stay text), and the mask id goes between the parts.

    Args:
        tokenize: [N] strings -> RaggedTensor [N, (tokens)] (BertPreprocessor.tokenize).
        text: [B] strings.
        mask_id: int. The vocabulary's [MASK] id.

    Example:
        >>> pre = bert_keras.BertPreprocessor("vocab.txt")
        >>> tokenize_keeping_masks(pre.tokenize, ["Paris is the [MASK]."], 103).to_list()
        [[3000, 2003, 1996, 103, 1012]]
    """
    parts = tf.strings.split(tf.reshape(tf.convert_to_tensor(text, tf.string), [-1]), sep=MASK)   # [B, (k + 1)]
    pieces = tokenize(parts.flat_values)                                                      # [N, (tokens)]
    part_row = parts.value_rowids()
    last = tf.equal(tf.range(tf.size(part_row, out_type=tf.int64)), tf.gather(parts.row_splits[1:] - 1, part_row))
    masks = tf.RaggedTensor.from_row_lengths(tf.fill([tf.reduce_sum(1 - tf.cast(last, tf.int64))], mask_id),
                                             1 - tf.cast(last, tf.int64))                     # [N, (0 or 1)]
    per_part = tf.concat([pieces, tf.cast(masks, pieces.dtype)], axis=1)
    return tf.RaggedTensor.from_row_splits(per_part, parts.row_splits, validate=False).merge_dims(1, 2)


@keras.saving.register_keras_serializable(package="bert_keras")
class BertMaskedLM(TaskModel):
    """Fill in the blank: an encoder with BERT's masked-LM head, on raw text.

    The head's output weights are the encoder's word table (tied). Released checkpoints carry the head
    (`cls/predictions/*`): `load_masked_lm` reads google-research, Hugging Face `BertForMaskedLM` /
    `BertForPreTraining` folders and `bert-keras pretrain` output. `fill_mask` (and the export's serving
    signature) turn each literal "[MASK]" of a text into the mask id and give the top-k tokens there.

    Args:
        encoder: BertEncoder.
        preprocessor: BertPreprocessor or None. Needed for raw text (`fill_mask`, `serve`).
        top_k: int. Tokens per mask that `serve` (the serving signature) returns.
        name: str or None. The Keras model name.

    Inputs and outputs:
        The id dict ([B, S] int32) plus "masked_lm_positions" [B, P] int32 (0-padded) -> logits [B, P, V] float32.

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> model = bert_keras.tasks.BertMaskedLM(encoder, bert_keras.BertPreprocessor("vocab.txt"))
        >>> [len(m) for m in model.fill_mask(["The [MASK] sat on the [MASK]."], top_k=3)[0]]
        [3, 3]
    """

    def __init__(self, encoder, preprocessor=None, *, top_k: int = 5, name=None):
        inputs = id_inputs()
        inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_lm_positions")
        sequence = encoder({k: inputs[k] for k in INPUT_NAMES})["sequence_output"]
        config = encoder.config
        head = MaskedLMHead(encoder.embeddings.word_embeddings, hidden_act=config.hidden_act,
                            initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
                            name="mlm_head")
        super().__init__(inputs, head(sequence, inputs["masked_lm_positions"]), encoder, preprocessor, name=name,
                         top_k=top_k)
        self.mlm_head, self.top_k = head, top_k

    def preprocess(self, x):
        """texts [B] -> the id dict [B, S] (literal "[MASK]" -> the mask id) plus "masked_lm_positions" [B, P]:
        each row's mask positions, left to right, 0-padded to the most masks in the batch."""
        pre = self.require_preprocessor()
        ids = pre.pack([tokenize_keeping_masks(pre.tokenize, x, self.mask_id)])
        word_ids = ids["input_word_ids"]
        columns = tf.broadcast_to(tf.range(tf.shape(word_ids)[1]), tf.shape(word_ids))
        positions = tf.ragged.boolean_mask(columns, tf.equal(word_ids, self.mask_id))
        return {**ids, "masked_lm_positions": positions.to_tensor(0)}

    @property
    def mask_id(self) -> int:
        return self.require_preprocessor().vocab.index(MASK)

    def serve(self, text, top_k=None) -> dict:
        """text [B] strings -> {"mask_count" [B] int32 (masks left after truncation), "token_ids" [B, P, K] int32,
        "tokens" [B, P, K] string, "probabilities" [B, P, K] float32}: the top K = top_k (default: the model's)
        tokens at each mask by falling probability (softmax over the vocabulary); rows past a text's masks are
        padding."""
        ids = self.preprocess(text)
        probabilities = tf.nn.softmax(tf.cast(self.inference(ids), tf.float32))              # [B, P, V]
        k = tf.minimum(tf.cast(self.top_k if top_k is None else top_k, tf.int32), tf.shape(probabilities)[-1])
        top = tf.math.top_k(probabilities, k)
        mask_count = tf.math.count_nonzero(ids["masked_lm_positions"], axis=1, dtype=tf.int32)   # 0 is [CLS]: padding
        vocab = tf.constant(self.require_preprocessor().vocab)
        return {"mask_count": mask_count, "token_ids": top.indices, "tokens": tf.gather(vocab, top.indices),
                "probabilities": top.values}

    def fill_mask(self, texts, top_k: int | None = None, batch_size: int | None = None) -> list:
        """The top-k tokens at every "[MASK]" of raw texts, for people (transformers' fill-mask pipeline).

        Args:
            texts: str or list of str, each holding at least one literal "[MASK]".
            top_k: int or None. Tokens per mask (default: the model's `top_k`).
            batch_size: int or None. Texts per traced call (default 32).

        Returns:
            Per text, per mask from left to right, a list of top_k dicts by falling probability:
            {"token": str, "id": int, "probability": float, "sequence": the text with this mask filled}.

        Raises:
            ValueError: a text has no "[MASK]", or one was cut off by max_seq_length (the text is named).

        Example:
            >>> model.fill_mask("Paris is the [MASK] of France.", top_k=2)[0][0][0]["token"]  # doctest: +SKIP
            'capital'
        """
        texts = [texts] if isinstance(texts, str) else list(texts)
        for text in texts:
            if MASK not in text:
                raise ValueError(f"no {MASK} in {text[:80]!r}: put {MASK} where a word should be predicted")
        k = tf.constant(self.top_k if top_k is None else top_k, tf.int32)
        size = batch_size or self.predict_batch_size
        results = []
        for start in range(0, len(texts), size):
            batch = texts[start:start + size]
            out = self.run_traced("serve", tf.constant(batch, tf.string), k)
            out = {name: value.numpy() for name, value in out.items()}
            for row, text in enumerate(batch):
                results.append(_fill_one(text, out, row))
        return results


def _fill_one(text: str, out: dict, row: int) -> list:
    """One text's answers from `serve`'s NumPy outputs (see fill_mask)."""
    parts = text.split(MASK)
    if out["mask_count"][row] < len(parts) - 1:
        raise ValueError(f"{len(parts) - 1 - out['mask_count'][row]} of the {MASK}s in {text[:80]!r} lie past "
                         "max_seq_length tokens and were cut: shorten the text or raise max_seq_length")
    masks = []
    for m in range(len(parts) - 1):
        answers = []
        for token, token_id, p in zip(out["tokens"][row, m], out["token_ids"][row, m], out["probabilities"][row, m]):
            token = token.decode("utf-8")
            filled = MASK.join(parts[:m + 1]) + token.removeprefix("##") + MASK.join(parts[m + 1:])
            answers.append({"token": token, "id": int(token_id), "probability": float(p), "sequence": filled})
        masks.append(answers)
    return masks


def load_masked_lm(source: str, vocab: str | None = None, lower_case: bool | None = None, top_k: int = 5,
                   **preprocessor_args) -> BertMaskedLM:
    """A BertMaskedLM with a source's encoder and masked-LM head: what `bert-keras fill-mask --model` takes.

    Sources with the head: a google-research checkpoint (`cls/predictions/*`), a Hugging Face `BertForMaskedLM`
    or `BertForPreTraining` folder, a `bert-keras pretrain --out` folder (or its pretrainer.keras), a saved
    BertMaskedLM, a zoo name. A preset name gives random weights (a vocab is needed).

    Args:
        source: str. See above; anything `load_backbone` takes.
        vocab: str or None. A `vocab.txt` instead of the one beside the checkpoint.
        lower_case: bool or None. None reads the casing from the vocabulary.
        top_k: int. Tokens per mask the serving signature returns.
        **preprocessor_args: passed to BertPreprocessor (seq_length, max_seq_length).

    Returns:
        BertMaskedLM.

    Raises:
        ValueError: the source has no masked-LM head (an encoder alone, a fine-tuned task model).
        FileNotFoundError: as `load_backbone`.

    Example:
        >>> model = load_masked_lm("pretrain_out")            # doctest: +SKIP
        >>> model.fill_mask("The [MASK] is blue.")[0][0][0]["token"]      # doctest: +SKIP
        'sky'
    """
    from bert_keras.checkpoints.load import pooler_unused
    from bert_keras.config import PRESETS
    from bert_keras.loading import load_backbone_and_heads
    with pooler_unused():                               # the masked LM never reads the pooler
        encoder, preprocessor, heads = load_backbone_and_heads(source, vocab, lower_case, **preprocessor_args)
    model = BertMaskedLM(encoder, preprocessor, top_k=top_k)
    if source in PRESETS:
        return model
    if not set(MLM_HEAD_NAMES) <= set(heads):
        raise ValueError(f"{source} has no masked-LM head (cls/predictions/*): it holds an encoder alone or a "
                         "fine-tuned model. Give a google-research checkpoint, a Hugging Face BertForMaskedLM or "
                         "BertForPreTraining folder, or a `bert-keras pretrain --out` folder")
    assign_named(model.mlm_head.checkpoint_variables(), heads, f"masked-LM head of {source}")
    return model
