"""What every task model shares: the id inputs, a float32 dense head, the preprocessor it owns, raw-text
fit/predict/evaluate, and serialization of the nested encoder and preprocessor.

A task model is a functional Keras model from the encoder's id dict to its logits, holding the BertPreprocessor
(vocab, casing, lengths) in its config, so one `.keras` file takes raw text. Text never enters the compiled
step: `fit`, `predict` and `evaluate` given raw text turn it into id batches in `tf.data` on the host
(`text_dataset`, keras-hub's Task pattern), so the same model trains on a TPU, where string ops cannot run.
Ids (a dict, or a dataset of them) pass straight through.

Each task says how a batch of raw inputs becomes ids (`preprocess`), how its targets become the model's
(`prepare_targets`), and what it answers (`serve`: raw text tensors -> answer tensors, in-graph). The export's
serving signature runs `serve`; the Python method for people (classify / answer / choose / entities) runs the
same `serve` and converts its tensors: one decoding for both.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bert_keras.encoder import INPUT_NAMES


def id_inputs(rank: int = 2) -> dict:
    """Keras inputs for the id dict: [B, S] (rank 2) or [B, choices, S] (rank 3), int32."""
    return {name: keras.Input(shape=(None,) * (rank - 1), dtype="int32", name=name) for name in INPUT_NAMES}


def dense_head(units: int, initializer_range: float, name: str) -> keras.layers.Dense:
    """A task head's output layer: [..., H] -> [..., units] float32 logits.

    float32: cross-entropy on bfloat16 logits loses the small differences fine-tuning needs. The kernel starts as
    transformers' heads do, Normal(0, initializer_range) with a zero bias, not as google-research's truncated
    normal (0.88x that spread). Under Adam at a fine-tuning learning rate a head moves little in a short run (mean
    |change| 0.0018 against a spread of 0.02 over the CoNLL-2003 acceptance run's 186 steps), so its starting
    scale stays. With the truncated start that run's training loss ended 0.025-0.043 higher and its entity F1
    2.2-3.4 points lower, on the same batches and dropout draws, seeds 0-2 (README, "Checked against PyTorch
    transformers")."""
    return keras.layers.Dense(units, name=name, dtype="float32",
                              kernel_initializer=keras.initializers.RandomNormal(stddev=initializer_range))


def is_text(x) -> bool:
    """Does `x` (arrays, lists, tensors, nests of them, or a dataset) hold strings rather than ids?"""
    if isinstance(x, tf.data.Dataset):
        return any(s.dtype == tf.string for s in tf.nest.flatten(x.element_spec))
    if isinstance(x, dict):
        return False
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (tuple, list)):
        return any(is_text(v) for v in x)
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        return x.dtype == tf.string
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "OSU"
    return False


def is_labelled(spec) -> bool:
    """A raw dataset element: (x, y) when it is a pair whose second part is not text (targets are numbers), else
    x alone (e.g. a (text_a, text_b) or (question, context) pair)."""
    return isinstance(spec, tuple) and len(spec) == 2 and not all(
        s.dtype == tf.string for s in tf.nest.flatten(spec[1]))


class TaskModel(keras.Model):
    """A functional model over a BertEncoder; subclasses call `super().__init__(inputs, outputs, encoder=...,
    preprocessor=..., <their own constructor arguments>)` and get `.keras` serialization for free."""

    def __init__(self, inputs, outputs, encoder, preprocessor=None, name=None, **task_args):
        super().__init__(inputs=inputs, outputs=outputs, name=name)
        self.encoder = encoder
        self.preprocessor = preprocessor
        self._task_args = task_args

    # ---- what each task defines -------------------------------------------------------------------------
    def preprocess(self, x):
        """One batch of raw inputs -> the id dict (in-graph; runs in tf.data and in the export)."""
        return self.require_preprocessor()(x)

    def prepare_targets(self, x, y):
        """One batch of raw inputs and targets -> (id dict, the model's targets). Default: targets as given."""
        return self.preprocess(x), y

    def serve(self, *texts) -> dict:
        """Raw text tensors -> answer tensors: what the export's serving_default returns."""
        raise NotImplementedError

    def inference(self, ids):
        """The model on an id batch in inference mode: what `serve` (and so every serving signature) runs between
        preprocessing and decoding. An export may shadow it on the instance, e.g. with a shape-bucketed,
        XLA-compiled call (savedmodels/xla.py)."""
        return self(ids, training=False)

    def batch(self, ds: tf.data.Dataset, batch_size: int, drop_remainder: bool) -> tf.data.Dataset:
        """Unbatched (x, y) or x elements -> batches of raw inputs."""
        return ds.batch(batch_size, drop_remainder=drop_remainder)

    def slices(self, x, y=None):
        """Raw inputs (and targets) as given by a user -> what tf.data.Dataset.from_tensor_slices takes."""
        x = tuple(x) if isinstance(x, list) and x and isinstance(x[0], (list, tuple, np.ndarray)) else x
        return x if y is None else (x, y)

    # ---- raw text in -------------------------------------------------------------------------------------
    def require_preprocessor(self):
        if self.preprocessor is None:
            raise ValueError(f"this {type(self).__name__} has no preprocessor, so it takes ids, not text (it was "
                             "saved by an older bert_keras or built without one): load it with "
                             "bert_keras.load_task_model(<its finetune folder>), which reads vocab.txt and "
                             "preprocessing.json beside it, then save it again; or pass preprocessor=...")
        return self.preprocessor

    def text_dataset(self, x, y=None, batch_size: int = 32, training: bool = False, seed: int = 0,
                     drop_remainder: bool | None = None) -> tf.data.Dataset:
        """Raw inputs (arrays/lists, or a dataset of already batched raw (x, y) or x) -> a dataset of
        (id dict, targets) or id dicts, preprocessed on the host. Training data is reshuffled every epoch. With
        a fixed seq_length, training drops the last partial batch (default) and every shape is static (what a
        TPU needs); otherwise every example is kept, as Keras' fit does."""
        self.require_preprocessor()
        if isinstance(x, tf.data.Dataset):
            ds, labelled = x, is_labelled(x.element_spec)
        else:
            labelled = y is not None
            ds = tf.data.Dataset.from_tensor_slices(self.slices(x, y))
            if training:
                ds = ds.shuffle(min(int(ds.cardinality()), 10_000), seed=seed, reshuffle_each_iteration=True)
            if drop_remainder is None:
                drop_remainder = training and self.preprocessor.seq_length is not None
            ds = self.batch(ds, batch_size, drop_remainder)
        # tf.data passes a tuple element's parts as arguments; plain graph code needs no autograph (seconds a map).
        if labelled:
            step = tf.autograph.experimental.do_not_convert(lambda x, y: self.prepare_targets(x, y))
        else:
            step = tf.autograph.experimental.do_not_convert(lambda *x: self.preprocess(x if len(x) > 1 else x[0]))
        ds = ds.map(step, num_parallel_calls=tf.data.AUTOTUNE)
        ds = self.after_preprocess(ds, batch_size, training, seed, bool(drop_remainder))
        if drop_remainder and self.preprocessor.seq_length and not isinstance(x, tf.data.Dataset):
            from bert_keras.training.static_shapes import with_static_shapes
            ds = with_static_shapes(ds, batch_size)         # fixed by construction: let a TPU compile see it
        return ds.prefetch(tf.data.AUTOTUNE)

    def after_preprocess(self, ds, batch_size, training, seed, drop_remainder):
        """Batches of (ids, targets) -> the batches to train on (SQuAD re-batches its windows here)."""
        return ds

    def _feed(self, x, y, batch_size, training):
        if not is_text(x):
            return x, y, batch_size
        return self.text_dataset(x, y, batch_size or 32, training), None, None

    def fit(self, x=None, y=None, batch_size=None, validation_data=None, **kwargs):
        if is_text(x):
            kwargs.setdefault("shuffle", False)        # text_dataset reshuffles every epoch itself
        x, y, batch_size = self._feed(x, y, batch_size, training=True)
        if validation_data is not None and is_text(validation_data[0] if isinstance(validation_data, tuple)
                                                    else validation_data):
            vx, vy = validation_data if isinstance(validation_data, tuple) else (validation_data, None)
            validation_data = self.text_dataset(vx, vy, 32, training=False)
        return super().fit(x, y, batch_size=batch_size, validation_data=validation_data, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        x, y, batch_size = self._feed(x, y, batch_size, training=False)
        return super().evaluate(x, y, batch_size=batch_size, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        x, _, batch_size = self._feed(x, None, batch_size, training=False)
        return super().predict(x, batch_size=batch_size, **kwargs)

    def with_preprocessor(self, preprocessor, **task_args):
        """A copy of this model (same weights) owning `preprocessor`, e.g. with another seq_length for an export;
        `task_args` change constructor arguments (label names, answer rules)."""
        config = {**self.get_config(), **task_args, "preprocessor": keras.saving.serialize_keras_object(preprocessor)}
        copy = type(self).from_config(config)
        copy.set_weights(self.get_weights())
        return copy

    def serve_numpy(self, *texts) -> dict:
        """`serve` on Python/NumPy text, traced once per input structure; tensors back as NumPy."""
        out = self.traced("serve")(*(tf.constant(t, tf.string) for t in texts))
        return {k: v.numpy() for k, v in out.items()}

    def traced(self, method: str):
        """self.<method> as a tf.function kept on the model: traced once per input signature, not once per call
        (an evaluation every epoch reuses it)."""
        name = f"_traced_{method}"
        if not hasattr(self, name):
            setattr(self, name, tf.function(getattr(self, method), reduce_retracing=True))
        return getattr(self, name)

    # ---- Keras plumbing ----------------------------------------------------------------------------------
    def get_config(self):
        config = {"encoder": keras.saving.serialize_keras_object(self.encoder), **self._task_args, "name": self.name}
        if self.preprocessor is not None:
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        return config

    def get_metrics_result(self):
        results = super().get_metrics_result()
        # tensorflow/tensorflow#72388: under MultiWorkerMirroredStrategy Keras 3 averages each step's logs across
        # workers with strategy.reduce("MEAN", v, axis=0), which fails on scalars; shape [1] averages the same.
        if (isinstance(tf.distribute.get_strategy(), tf.distribute.MultiWorkerMirroredStrategy)
                and not tf.distribute.in_cross_replica_context()):
            results = {k: keras.ops.reshape(v, (1,)) for k, v in results.items()}
        return results

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # keras-team/keras#20329: under MultiWorkerMirroredStrategy, fit() first reduces a dict batch with
        # strategy.reduce, which fails on nested inputs. When the model, its optimizer and its compiled loss and
        # metrics are already built there is nothing to build, so the reduce is skipped.
        built = (all(layer.built for layer in self._flatten_layers()) and self.optimizer is not None
                 and self.optimizer.built and self._compile_loss is None and self._compile_metrics is None)
        if not built:
            super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    @classmethod
    def from_preset(cls, name: str, progress: bool = True, **task_args):
        """The task model on a released checkpoint (a zoo name, an archive or a checkpoint folder), with the
        checkpoint's preprocessor, e.g. `BertClassifier.from_preset("bert_base_uncased", num_classes=2)`."""
        from bert_keras.zoo import from_preset
        encoder, preprocessor = from_preset(name, progress=progress)
        return cls(encoder, preprocessor=preprocessor, **task_args)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        if config.get("preprocessor"):
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)
