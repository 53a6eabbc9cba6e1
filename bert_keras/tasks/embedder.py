"""Sentence embeddings: a sentence-transformers model (all-MiniLM, bge, e5, gte: BERT encoders) as a task model.

Encoder -> pooling of the last layer's token vectors (sentence_pooling.SentencePooling) -> optional Dense layers
-> optional L2 normalization: sentence-transformers' `Transformer`, `Pooling`, `Dense` and `Normalize` modules,
in that order. Prompts ("query: ", "passage: ") are prepended to the text before tokenization, as
sentence-transformers' `encode(prompt_name=...)` does; with `include_prompt=False` their tokens are left out of
the pooling. `max_seq_length` (sentence_bert_config.json's) is the preprocessor's.

Inputs: the id dict [B, S] (and optionally "prompt_length" [B], the prompt's tokens with [CLS]). Output: the
embedding [B, D] float32. Raw text: texts [B]. `encode` and `similarity` answer as sentence-transformers' do.
Read a sentence-transformers folder with tasks.sentence_transformers.load_sentence_transformer.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bert_keras.sentence_pooling import L2Normalize, SentencePooling
from bert_keras.tasks.base import TaskModel, id_inputs

ACTIVATIONS = {"tanh": "tanh", "identity": None, "relu": "relu", "gelu": "gelu", "sigmoid": "sigmoid"}
SIMILARITIES = ("cosine", "dot", "euclidean", "manhattan")


@keras.saving.register_keras_serializable(package="bert_keras")
class BertEmbedder(TaskModel):
    """Sentence embeddings from raw text, as sentence-transformers computes them. Arguments after `encoder` are
    keyword-only.

    Args:
        encoder: BertEncoder. The backbone.
        pooling: str or list of str. sentence_pooling.MODES: "mean" (all-MiniLM), "cls" (bge), "max",
            "mean_sqrt_len_tokens", "weightedmean"; several concatenate.
        include_prompt: bool. False leaves a prompt's tokens out of the pooling (INSTRUCTOR-style models).
        dense: list of dicts or None. Dense layers after the pooling, each {"units": int, "activation": one of
            ACTIVATIONS, "use_bias": bool} (sentence-transformers' 2_Dense, 3_Dense, ...).
        normalize: bool. L2-normalize the output (sentence-transformers' Normalize module).
        prompts: dict of str or None. {name: text prepended before tokenization}, e.g. {"query": "query: "}.
        default_prompt_name: str or None. The prompt `encode` (and the export's serving_default) applies when
            none is named.
        similarity_fn_name: str. "cosine", "dot", "euclidean" or "manhattan": what `similarity` computes.
        preprocessor: BertPreprocessor or None. Needed for raw text; its max_seq_length is the model's.
        name: str or None. The Keras model name.

    Inputs and outputs:
        The id dict, each [B, S] int32 (optionally "prompt_length" [B] int32) -> embedding [B, D] float32.
        Raw text: texts [B]. `encode(texts)` -> NumPy [N, D] ([D] for one str).

    Raises:
        ValueError: an unknown pooling mode, Dense activation or similarity, or a default_prompt_name that is not
            among the prompts.

    Example:
        >>> model = bert_keras.tasks.BertEmbedder(
        ...     bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")), pooling="mean", normalize=True,
        ...     prompts={"query": "query: "}, preprocessor=bert_keras.BertPreprocessor("vocab.txt"))
        >>> model.encode(["a fine film", "a dull film"]).shape, model.encode("a film", prompt_name="query").shape
        ((2, 128), (128,))
        >>> model.similarity(model.encode(["a"]), model.encode(["a", "b"])).shape
        (1, 2)
    """

    def __init__(self, encoder, *, pooling="mean", include_prompt: bool = True, dense=None, normalize: bool = False,
                 prompts=None, default_prompt_name=None, similarity_fn_name: str = "cosine", preprocessor=None,
                 name=None):
        dense = [dict(d) for d in dense or []]
        for d in dense:
            if d.get("activation", "identity") not in ACTIVATIONS:
                raise ValueError(f"Dense activation {d.get('activation')!r} is none of {', '.join(ACTIVATIONS)}")
        prompts = dict(prompts or {})
        if default_prompt_name is not None and default_prompt_name not in prompts:
            raise ValueError(f"default_prompt_name {default_prompt_name!r} is not among the prompts "
                             f"({', '.join(prompts) or 'none'})")
        if similarity_fn_name not in SIMILARITIES:
            raise ValueError(f"similarity_fn_name {similarity_fn_name!r} is none of {', '.join(SIMILARITIES)}")
        inputs = id_inputs()
        out = encoder(inputs)["sequence_output"]
        pool = SentencePooling(pooling, include_prompt=include_prompt, name="pooling")
        x = pool(out, inputs["input_mask"])
        for i, d in enumerate(dense):
            x = keras.layers.Dense(d["units"], activation=ACTIVATIONS[d.get("activation", "identity")],
                                   use_bias=d.get("use_bias", True), dtype="float32", name=f"dense_{i}")(x)
        if normalize:
            x = L2Normalize(name="normalize")(x)
        super().__init__(inputs, x, encoder, preprocessor, name=name, pooling=pool.modes,
                         include_prompt=bool(include_prompt), dense=dense, normalize=bool(normalize),
                         prompts=prompts, default_prompt_name=default_prompt_name,
                         similarity_fn_name=similarity_fn_name)

    # ---- the model ---------------------------------------------------------------------------------------------
    def call(self, inputs, training=None, mask=None):
        """The functional graph; with "prompt_length" [B] in the inputs (and include_prompt=False), the same
        layers with the prompt's tokens left out of the pooling."""
        if "prompt_length" not in inputs:
            return super().call(inputs, training=training, mask=mask)
        ids = {k: v for k, v in inputs.items() if k != "prompt_length"}
        out = self.encoder(ids, training=training)["sequence_output"]
        x = self.get_layer("pooling")(out, ids["input_mask"], prompt_length=inputs["prompt_length"])
        return self.head(x)

    def head(self, pooled):
        """Pooled vectors [B, P] -> the Dense layers and normalization -> [B, D]."""
        for i in range(len(self._task_args["dense"])):
            pooled = self.get_layer(f"dense_{i}")(pooled)
        return self.get_layer("normalize")(pooled) if self._task_args["normalize"] else pooled

    def compute_output_spec(self, inputs, training=None, mask=None):
        if "prompt_length" not in inputs:
            return super().compute_output_spec(inputs, training=training, mask=mask)
        return super().compute_output_spec({k: v for k, v in inputs.items() if k != "prompt_length"})

    @property
    def prompts(self) -> dict:
        """{name: prompt text} (sentence-transformers' `prompts`)."""
        return dict(self._task_args["prompts"])

    @property
    def default_prompt_name(self):
        """The prompt applied when none is named, or None."""
        return self._task_args["default_prompt_name"]

    @property
    def similarity_fn_name(self) -> str:
        """What `similarity` computes: "cosine", "dot", "euclidean" or "manhattan"."""
        return self._task_args["similarity_fn_name"]

    @property
    def embedding_dimension(self) -> int:
        """D, the width of an embedding."""
        return int(self.output.shape[-1])

    # ---- raw text --------------------------------------------------------------------------------------------
    def resolve_prompt(self, prompt_name=None, prompt=None) -> str:
        """The prompt text `encode` prepends: `prompt` if given, else the named one, else the default one, else
        "" (sentence-transformers' order)."""
        if prompt is not None:
            return prompt
        if prompt_name is not None:
            if prompt_name not in self.prompts:
                raise ValueError(f"prompt_name {prompt_name!r} is not among the model's prompts "
                                 f"({', '.join(self.prompts) or 'none'})")
            return self.prompts[prompt_name]
        return self.prompts.get(self.default_prompt_name, "") if self.default_prompt_name else ""

    def prompt_length(self, prompt: str) -> int:
        """The tokens of `prompt` with [CLS], without the [SEP] (sentence-transformers' prompt_length); 0 for ""."""
        if not prompt:
            return 0
        with tf.init_scope():                  # eagerly, also while `serve` is traced: a constant of the graph
            return 1 + int(self.require_preprocessor().tokenize(tf.constant([prompt])).row_lengths()[0])

    @tf.autograph.experimental.do_not_convert           # plain graph code: the prompt's length is a Python int
    def serve(self, text, prompt=None) -> dict:
        """text: [B] strings -> {"embedding": [B, D] float32}; `prompt` (a Python str) is prepended first."""
        text = tf.convert_to_tensor(text, tf.string)
        prompt = self.resolve_prompt(prompt=prompt)
        if prompt:
            text = tf.strings.join([tf.fill(tf.shape(text), prompt), text])
        ids = self.preprocess(text)
        length = self.prompt_length(prompt)
        if length and not self._task_args["include_prompt"]:
            ids = {**ids, "prompt_length": tf.fill(tf.shape(text), length)}
        return {"embedding": tf.cast(self.inference(ids), tf.float32)}

    def encode(self, texts, prompt_name=None, prompt=None, batch_size: int | None = None,
               normalize_embeddings: bool = False) -> np.ndarray:
        """Embeds raw texts, as sentence-transformers' `SentenceTransformer.encode`.

        Args:
            texts: str or list of str. One text gives one vector [D]; a list gives [N, D].
            prompt_name: str or None. A key of `prompts`; None applies `default_prompt_name`'s, if any.
            prompt: str or None. A prompt text, instead of a named one.
            batch_size: int or None. Texts per traced call (default 32).
            normalize_embeddings: bool. L2-normalize the result (for a model without a Normalize module).

        Returns:
            NumPy float32 [N, D], or [D] for one str.

        Example:
            >>> model.encode(["a fine film"], prompt_name="query").shape        # doctest: +SKIP
            (1, 384)
        """
        one = isinstance(texts, (str, bytes))
        texts = [texts] if one else list(texts)
        text = self.resolve_prompt(prompt_name, prompt)
        method = self._prompt_method(text)
        vectors = [out["embedding"] for out in self.batched(method, texts, batch_size=batch_size)]
        result = (np.concatenate(vectors) if vectors else np.zeros([0, self.embedding_dimension], "float32"))
        if normalize_embeddings:
            result = result / np.maximum(np.linalg.norm(result, axis=-1, keepdims=True), 1e-12)
        return result[0] if one else result

    def _prompt_method(self, prompt: str) -> str:
        """The name of a method serving texts with `prompt` prepended (made once per prompt, traced once)."""
        name = f"_serve_prompt_{abs(hash(prompt))}"
        if not hasattr(self, name):
            object.__setattr__(self, name, lambda text: self.serve(text, prompt=prompt))
        return name

    def similarity(self, a, b) -> np.ndarray:
        """Pairwise similarity of two sets of embeddings, by `similarity_fn_name` (sentence-transformers' own
        definitions: cosine, dot product, and the negative euclidean or manhattan distance).

        Args:
            a: array [N, D] (or [D]). b: array [M, D] (or [D]).

        Returns:
            NumPy float32 [N, M].

        Example:
            >>> model.similarity(np.eye(2), np.eye(2)).tolist()                 # doctest: +SKIP
            [[1.0, 0.0], [0.0, 1.0]]
        """
        a, b = (np.atleast_2d(np.asarray(x, "float32")) for x in (a, b))
        kind = self.similarity_fn_name
        if kind == "cosine":
            a = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
            b = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
        if kind in ("cosine", "dot"):
            return a @ b.T
        if kind == "euclidean":
            return -np.sqrt(np.maximum(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1), 0))
        return -np.abs(a[:, None, :] - b[None, :, :]).sum(-1)
