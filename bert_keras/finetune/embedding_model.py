"""The model `finetune --task embedding` trains: a BertEmbedder run on every column of a batch of rows.

A batch is the id dict [B, C, S] (C columns: anchor, positive, hard negatives; or a scored pair's two texts); the
model folds it into B * C sequences, embeds them with the BertEmbedder and unfolds the embeddings to [B, C, D], which
the compiled loss (tasks/embedding_losses.py) takes as `y_pred`. What a run saves is the BertEmbedder itself
(`with_preprocessor`), so model.keras is a plain embedder that `encode`s and exports.

GradCache (`mini_batch_size`, sentence-transformers' CachedMultipleNegativesRankingLoss): the step embeds the
batch `mini_batch_size` rows at a time without keeping activations, takes the loss's gradient with respect to the
embeddings once, then runs each mini-batch again with gradients and back-propagates its cached embedding gradients:
the parameter gradients of the whole batch's loss, with the memory of one mini-batch. The dropout seeds are set
back before the second pass, so each mini-batch draws the masks it drew in the first (sentence-transformers'
RandContext). TensorFlow only in this version.
"""

from __future__ import annotations

import keras
from keras import ops


class EmbeddingTrainingModel(keras.Model):
    """A BertEmbedder over rows of texts: ids [B, C, S] -> embeddings [B, C, D].

    Args:
        embedder: BertEmbedder. The model trained (and saved).
        mini_batch_size: int or None. Rows per mini-batch of the cached (GradCache) step; None: Keras' own step.

    Example:
        >>> embedder = bert_keras.tasks.BertEmbedder(bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")),
        ...                                          preprocessor=bert_keras.BertPreprocessor("vocab.txt"))
        >>> model = EmbeddingTrainingModel(embedder)
        >>> ids = embedder.preprocessor([["a cat", "a kitten"], ["a dog", "a puppy"]])
        >>> tuple(model(ids).shape)
        (2, 2, 128)
    """

    def __init__(self, embedder, mini_batch_size: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.embedder = embedder
        self.mini_batch_size = mini_batch_size
        self.max_rows = None            # rows of the largest batch (task.dataset sets it): the cached step's count

    @property
    def encoder(self):
        """The BertEncoder trained."""
        return self.embedder.encoder

    @property
    def preprocessor(self):
        """The embedder's BertPreprocessor."""
        return self.embedder.preprocessor

    def call(self, inputs, training=None):
        ids = inputs["input_word_ids"]
        rows, columns, length = ops.shape(ids)[0], ops.shape(ids)[1], ops.shape(ids)[2]
        folded = {k: ops.reshape(v, (-1, length)) for k, v in inputs.items()}
        embeddings = self.embedder(folded, training=training)
        return ops.reshape(embeddings, (rows, columns, ops.shape(embeddings)[-1]))

    def with_preprocessor(self, preprocessor, **task_args):
        """The trained BertEmbedder (a copy owning `preprocessor`): what finetune saves as model.keras."""
        return self.embedder.with_preprocessor(preprocessor, **task_args)

    def replace_embedder(self, embedder) -> None:
        """Trains `embedder` instead (before the model is built and compiled): e.g. a sentence-transformers
        folder's modules over the same encoder."""
        self._tracker.untrack(self.embedder)
        self.embedder = embedder

    def start_from_source(self, source: str) -> str | None:
        """Trains a sentence-transformers folder's own modules (pooling, Dense layers with their weights,
        Normalize, prompts) when `source` is one (finetune/source_head.py calls it): the line to print, or None
        (any other source keeps the BertEmbedder built with --pooling)."""
        from bert_keras.checkpoints.sentence_transformers import is_cross_encoder, is_sentence_transformers_folder
        from bert_keras.tasks.sentence_transformers import load_sentence_transformer
        from bert_keras.storage import local_copy
        from bert_keras.tasks import BertEmbedder
        folder = local_copy(source)
        if not is_sentence_transformers_folder(folder) or is_cross_encoder(folder):
            return None
        modules = load_sentence_transformer(folder)
        keep = ("pooling", "include_prompt", "dense", "normalize", "prompts", "default_prompt_name",
                "similarity_fn_name")
        args = {k: modules.get_config()[k] for k in keep}
        embedder = BertEmbedder(self.encoder, **args, preprocessor=self.preprocessor)
        for i in range(len(args["dense"])):
            embedder.get_layer(f"dense_{i}").set_weights(modules.get_layer(f"dense_{i}").get_weights())
        self.replace_embedder(embedder)
        return (f"continuing the sentence-transformers modules of {source}: pooling {'+'.join(args['pooling'])}, "
                f"{len(args['dense'])} Dense, {'normalized' if args['normalize'] else 'not normalized'}")

    # ---- GradCache ---------------------------------------------------------------------------------------------
    def train_step(self, *args):
        if self.mini_batch_size is None:            # Keras' step ((data) on TensorFlow, (state, data) on JAX)
            return super().train_step(*args)
        (data,) = args
        import tensorflow as tf
        from keras.src.losses.loss import unscale_loss_for_distribution
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        loss, gradients, embeddings = self._cached_step(x, y, sample_weight)
        self._loss_tracker.update_state(unscale_loss_for_distribution(loss),
                                        sample_weight=tf.shape(x["input_word_ids"])[0])
        self.optimizer.apply_gradients(zip(gradients, self.trainable_weights))
        return self.compute_metrics(x, y, embeddings, sample_weight=sample_weight)

    def cached_gradients(self, x, y, sample_weight=None):
        """(the compiled loss of the batch, its gradients for `trainable_weights`), computed GradCache's way,
        `mini_batch_size` rows at a time (see the module docstring). TensorFlow.

        Args:
            x: the id dict [B, C, S]. y: the targets [B]. sample_weight: None (or Keras' sample weights).

        Returns:
            (scalar loss, list of dense gradients in the order of `trainable_weights`).
        """
        return self._cached_step(x, y, sample_weight)[:2]

    def _cached_step(self, x, y, sample_weight):
        import tensorflow as tf

        from bert_keras.training.resume import seed_generators
        if keras.backend.backend() != "tensorflow":
            raise ValueError("the cached loss (GradCache) trains on TensorFlow in this version: use --loss mnrl "
                             "on JAX, or --backend tensorflow")
        size = self.mini_batch_size
        rows = x["input_word_ids"].shape[0] or self.max_rows
        if rows is None:
            raise ValueError("the cached loss needs the largest batch's rows: set model.max_rows")
        parts = [{k: v[i:i + size] for k, v in x.items()} for i in range(0, rows, size)]
        generators = seed_generators(self)
        start = [tf.identity(g.state.value) for g in generators]
        embeddings = tf.concat([tf.stop_gradient(self(part, training=True)) for part in parts], axis=0)
        with tf.GradientTape() as tape:
            tape.watch(embeddings)
            loss = self._compute_loss(x=x, y=y, y_pred=embeddings, sample_weight=sample_weight, training=True)
            scaled = self.optimizer.scale_loss(loss) if self.optimizer is not None else loss
        cached = tape.gradient(scaled, embeddings)
        for generator, state in zip(generators, start):        # the same dropout masks as the first pass
            generator.state.assign(state)
        weights = self.trainable_weights
        total = [tf.zeros_like(w) for w in weights]
        for i, part in zip(range(0, rows, size), parts):
            with tf.GradientTape() as tape:
                surrogate = tf.reduce_sum(self(part, training=True) * cached[i:i + size])
            for j, g in enumerate(tape.gradient(surrogate, weights)):
                if g is not None:
                    total[j] = total[j] + tf.convert_to_tensor(g)
        return loss, total, embeddings
