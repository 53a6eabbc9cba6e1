"""BertEncoder: token ids in, contextual vectors out. The whole model on one screen.

Inputs (a dict, the TF Hub BERT names), each [B, S] int32:
  input_word_ids   WordPiece ids, [CLS] first, [SEP] after each segment, 0 ([PAD]) after.
  input_mask       1 for real tokens, 0 for padding.
  input_type_ids   segment of each token: 0 for the first, 1 for the second.
Outputs (a dict):
  sequence_output  [B, S, H] the last layer's vectors; 0 at padding, which the blocks skip (layers.RealTokens;
                   under XLA/TPU padding is computed and its values are arbitrary).
  pooled_output    [B, H]    tanh(dense([CLS] vector)): the sentence vector NSP was trained on.
  encoder_outputs  list of L tensors [B, S, H], every layer's output (the last equals sequence_output).
`encoder(inputs, pooled_only=True)` returns pooled_output [B, H] alone, the last layer computing only [CLS]: what
the classification and multiple-choice heads use. `encoder(inputs, attention_maps=True)` adds "attention_maps": L
float32 [B, N, S, S], each block's attention probabilities (bert_keras.attention draws them).
Packed rows (several whole sequences back to back, pretraining/packed_records.py): the dict also holds
  position_ids         [B, S] each token's position in its own sequence (0 at each sequence's [CLS]);
  packed_sequence_ids  [B, S] which sequence a token is in, 1..k; 0 at padding.
Attention then stays within each sequence (layers.packed_attention_bias), so every sequence's vectors are what it
gets alone in a padded row; `encoder.pool_at(sequence_output, cls_positions)` is each sequence's pooled output.
"""

from __future__ import annotations

import keras
from keras import ops

from bert_keras.config import BertConfig
from bert_keras.layers import BertEmbeddings, TransformerBlock

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
PACKED_INPUT_NAMES = ("position_ids", "packed_sequence_ids")        # the extra inputs of packed rows


@keras.saving.register_keras_serializable(package="bert_keras")
class BertEncoder(keras.Model):
    """The BERT encoder: token ids in, contextual token vectors and a pooled sentence vector out.

    Embeddings, L post-LayerNorm transformer blocks and the tanh pooler of google-research/bert's `BertModel`,
    as a functional Keras model whose inputs and outputs are TF Hub's BERT names, so it drops in wherever a TF
    Hub BERT encoder was used. No pretraining heads (see `bert_keras.tasks.BertPretrainer`). Built from a
    `BertConfig` alone, it has random weights; released weights come from `load_checkpoint`, `from_preset` or
    a `.keras` file. Under a mixed precision policy the residual stream, LayerNorms, softmax and the pooled
    output stay float32.

    Args:
        config: BertConfig (or its dict, as in `get_config`). The sizes, dropout rates and initializer.
        **kwargs: Keras model arguments (name, trainable).

    Call arguments:
        inputs: dict of [B, S] int32 tensors: "input_word_ids" (WordPiece ids, [CLS] first, 0 at padding),
            "input_mask" (1 for tokens, 0 for padding), "input_type_ids" (segment 0 or 1).
        training: bool. Applies dropout when True.
        pooled_only: bool. Returns only the pooled output [B, H], computing the last block for [CLS] alone.
        attention_maps: bool. Adds "attention_maps" to the dict: a list of L float32 [B, N, S, S], each block's
            attention probabilities [batch, head, query, key] after the softmax, before dropout (each row sums
            to 1; keys at padding get 0; rows of padding queries are arbitrary). Off, nothing more is computed.
        Packed rows: `inputs` also holds "position_ids" and "packed_sequence_ids" [B, S] (module docstring);
            attention stays within each sequence and pooled_output is the row's first sequence's (pool_at gives
            every sequence's). Not with pooled_only. Without those two keys the functional graph runs as built.

    Returns:
        dict: "sequence_output" [B, S, H] (0 at padding outside XLA), "pooled_output" [B, H] float32
        (tanh(dense([CLS] vector)), the vector NSP was trained on), "encoder_outputs" (a list of L [B, S, H],
        every block's output), and "attention_maps" with `attention_maps=True`. With `pooled_only=True`, the
        [B, H] pooled output alone.

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> preprocessor = bert_keras.BertPreprocessor("vocab.txt")
        >>> out = encoder(preprocessor(["the movie was great", "dull"]))
        >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape), len(out["encoder_outputs"])
        ((2, 8, 128), (2, 128), 2)
        >>> tuple(encoder(preprocessor(["dull"]), pooled_only=True).shape)
        (1, 128)
        >>> maps = encoder(preprocessor(["dull"]), attention_maps=True)["attention_maps"]
        >>> len(maps), tuple(maps[0].shape)                      # L blocks of [B, N, S, S]
        (2, (1, 2, 8, 8))
        >>> packed = {"input_word_ids": np.array([[101, 7, 102, 101, 9, 102, 0]]),      # two sequences, then [PAD]
        ...           "input_mask": np.array([[1, 1, 1, 1, 1, 1, 0]]), "input_type_ids": np.zeros((1, 7), "int32"),
        ...           "position_ids": np.array([[0, 1, 2, 0, 1, 2, 0]]),
        ...           "packed_sequence_ids": np.array([[1, 1, 1, 2, 2, 2, 0]])}
        >>> out = encoder(packed)
        >>> tuple(encoder.pool_at(out["sequence_output"], np.array([[0, 3]])).shape)     # each sequence's [CLS]
        (1, 2, 128)
    """

    def __init__(self, config: BertConfig | dict, **kwargs):
        config = BertConfig.from_dict(config) if isinstance(config, dict) else config
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        embeddings = BertEmbeddings(
            vocab_size=config.vocab_size, hidden_size=config.hidden_size,
            max_position_embeddings=config.max_position_embeddings, type_vocab_size=config.type_vocab_size,
            initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
            dropout=config.hidden_dropout_prob, name="embeddings")
        blocks = [TransformerBlock(
            hidden_size=config.hidden_size, num_attention_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size, hidden_act=config.hidden_act,
            hidden_dropout=config.hidden_dropout_prob, attention_dropout=config.attention_probs_dropout_prob,
            initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
            name=f"transformer_layer_{i}") for i in range(config.num_hidden_layers)]
        pooler = keras.layers.Dense(
            config.hidden_size, activation="tanh", name="pooler",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=config.initializer_range))

        super().__init__(inputs=inputs, outputs=_outputs(pooler, run_layers(embeddings, blocks, inputs)), **kwargs)
        self.config = config
        self.embeddings = embeddings
        self.transformer_layers = blocks
        self.pooler = pooler

    def call(self, inputs, training=None, mask=None, pooled_only=False, attention_maps=False):
        """`encoder(inputs, pooled_only=True)`: pooled_output [B, H] alone, equal to the full call's and cheaper:
        the last layer computes only the [CLS] row (1/L of the blocks' work saved). For heads that read nothing
        else (classification, multiple choice); the encoder stays one node of their graph (and of their saved
        weights' layout). `attention_maps=True`: the same layers run outside the functional graph, each also
        returning its probabilities; off, the graph runs as built. Packed rows (`is_packed(inputs)`) run the same
        layers outside the graph too, with their positions and block-diagonal mask."""
        packed = is_packed(inputs)
        if attention_maps or packed:
            if pooled_only:
                raise ValueError("pooled_only and attention_maps do not combine: the maps need every query row"
                                 if attention_maps else "pooled_only reads one [CLS] a row; a packed row has one "
                                 "per sequence: use encoder.pool_at(sequence_output, cls_positions)")
            maps = [] if attention_maps else None
            outputs = _outputs(self.pooler, run_layers(self.embeddings, self.transformer_layers, inputs, training,
                                                       attention_maps=maps))
            return {**outputs, "attention_maps": maps} if attention_maps else outputs
        if not pooled_only:
            return super().call(inputs, training=training, mask=mask)
        x = run_layers(self.embeddings, self.transformer_layers, inputs, training, cls_only=True)[-1]
        return ops.cast(self.pooler(x[:, 0, :]), "float32")

    def compute_output_spec(self, inputs, training=None, mask=None, pooled_only=False, attention_maps=False):
        if attention_maps:
            b, s = inputs["input_word_ids"].shape
            maps = [keras.KerasTensor((b, self.config.num_attention_heads, s, s), "float32")
                    for _ in range(self.config.num_hidden_layers)]
            return {**super().compute_output_spec(inputs, training=training, mask=mask), "attention_maps": maps}
        if not pooled_only:
            return super().compute_output_spec(inputs, training=training, mask=mask)
        return keras.KerasTensor((inputs["input_word_ids"].shape[0], self.config.hidden_size), "float32")

    def pool_at(self, sequence_output, positions):
        """The pooled output at given positions: each packed sequence's, from its own [CLS].

        Args:
            sequence_output: [B, S, H] this encoder's sequence_output.
            positions: [B, K] int, where each [CLS] is (packed records' cls_positions; 0 for absent sequences).

        Returns:
            [B, K, H] float32: tanh(dense(vector at each position)), as pooled_output is at position 0.

        Example:
            >>> pooled = encoder.pool_at(encoder(packed)["sequence_output"], packed_cls_positions)  # doctest: +SKIP
        """
        cls = ops.take_along_axis(sequence_output, ops.expand_dims(ops.cast(positions, "int32"), -1), axis=1)
        return ops.cast(self.pooler(cls), "float32")

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def is_packed(inputs) -> bool:
    """Does the input dict hold packed rows (PACKED_INPUT_NAMES)? One of the two names without the other is a
    ValueError naming the missing one."""
    present = [name in inputs for name in PACKED_INPUT_NAMES] if isinstance(inputs, dict) else [False, False]
    if any(present) and not all(present):
        missing = PACKED_INPUT_NAMES[present.index(False)]
        raise ValueError(f"packed inputs need both {' and '.join(PACKED_INPUT_NAMES)}; {missing!r} is missing")
    return all(present)


def run_layers(embeddings, blocks, inputs, training=None, cls_only=False, attention_maps=None) -> list:
    """Embeddings then each block; returns every block's output [B, S, H] (with cls_only the last is [B, 1, H]).
    attention_maps: None, or a list each block's attention probabilities [B, N, S, S] float32 are appended to.
    Packed inputs (`is_packed`): their positions and block-diagonal mask (keyword arguments only then, so the
    functional graph built on the three id inputs is the same as without packing)."""
    packed = {"packed_sequence_ids": inputs["packed_sequence_ids"]} if is_packed(inputs) else {}
    positions = {"position_ids": inputs["position_ids"]} if packed else {}
    x = embeddings(inputs["input_word_ids"], inputs["input_type_ids"], training=training, **positions)
    outputs = []
    for i, block in enumerate(blocks):
        last = cls_only and i == len(blocks) - 1
        if attention_maps is None:
            x = block(x, inputs["input_mask"], training=training, cls_only=last, **packed)
        else:
            x, probs = block(x, inputs["input_mask"], training=training, cls_only=last, return_attention=True,
                             **packed)
            attention_maps.append(probs)
        outputs.append(x)
    return outputs


def _outputs(pooler, layer_outputs) -> dict:
    """The output dict of every block's output: the last as sequence_output, and its pooled [CLS] vector."""
    x = layer_outputs[-1]
    return {"sequence_output": x, "pooled_output": ops.cast(pooler(x[:, 0, :]), "float32"),
            "encoder_outputs": layer_outputs}
