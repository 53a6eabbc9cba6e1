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

from bert_keras.backends import host_inference, on_tensorflow, pad_batch_lengths
from bert_keras.encoder import INPUT_NAMES


def id_inputs(rank: int = 2) -> dict:
    """Keras inputs for the id dict: [B, S] (rank 2) or [B, choices, S] (rank 3), int32."""
    return {name: keras.Input(shape=(None,) * (rank - 1), dtype="int32", name=name) for name in INPUT_NAMES}


def dense_head(units: int, initializer_range: float, name: str) -> keras.layers.Dense:
    """A task head's output layer: [..., H] -> [..., units] float32 logits.

    float32: cross-entropy on bfloat16 logits loses the small differences fine-tuning needs. The kernel starts as
    transformers' heads do, Normal(0, initializer_range) with a zero bias, not google-research's narrower
    truncated normal: a head moves little in a short fine-tuning run, so its starting scale matters
    (docs/accuracy.md)."""
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


def as_batch_input(x):
    """A readable method's input -> what Dataset.from_tensor_slices takes: strings [N]; nested lists of strings
    (endings per context, words per sentence) [N, C] when every row has the same length, else a RaggedTensor."""
    if isinstance(x, (tf.Tensor, tf.RaggedTensor, np.ndarray)):
        return x
    x = list(x)
    if x and isinstance(x[0], (list, tuple, np.ndarray)):
        rows = [list(row) for row in x]
        if len({len(row) for row in rows}) == 1 and rows[0]:
            return tf.constant(rows, tf.string)               # endings [B, C]: one count for every example
        return tf.ragged.constant(rows, tf.string, ragged_rank=1)
    return tf.constant(x, tf.string) if x else tf.zeros([0], tf.string)


def examples(*inputs) -> tuple:
    """The readable methods' inputs (texts; texts and second texts; questions and contexts; contexts and
    endings) as batches with one row per example: a bare string is one example, so `classify("a film")` answers
    once, not once per character.

    Args:
        *inputs: each a list (or array, or tensor) of per-example values, or one example's values with a str
            first (a text; a question and its context; a context and its list of endings).

    Returns:
        tuple of the inputs, each with a leading example dimension.

    Raises:
        ValueError: the inputs hold different numbers of examples, or a str stands where a list of them is due.

    Example:
        >>> examples("a film")
        (['a film'],)
        >>> examples("Who?", "Ada did.")
        (['Who?'], ['Ada did.'])
    """
    if inputs and isinstance(inputs[0], (str, bytes)):
        return tuple([x] for x in inputs)
    if any(isinstance(x, (str, bytes)) for x in inputs):
        raise ValueError("a single string stands beside a list of examples: give a list for every input (one "
                         "entry per example), or strings for all of them (one example)")
    sizes = [len(x) if not isinstance(x, (tf.Tensor, tf.RaggedTensor)) else int(x.shape[0] or 0) for x in inputs]
    if len(set(sizes)) > 1:
        raise ValueError(f"the inputs hold different numbers of examples ({', '.join(map(str, sizes))}): give one "
                         "entry of each per example")
    return inputs


def relaxed_spec(value):
    """A tensor or RaggedTensor -> its TypeSpec with every dimension unknown (rank and dtype kept)."""
    if isinstance(value, tf.RaggedTensor):
        return tf.RaggedTensorSpec([None] * value.shape.rank, value.dtype, value.ragged_rank,
                                   value.row_splits.dtype)
    value = tf.convert_to_tensor(value)
    return tf.TensorSpec([None] * value.shape.rank, value.dtype)


class TaskModel(keras.Model):
    """The base of the task models: a functional model over a BertEncoder that also takes raw text.

    Subclasses build their head and call `super().__init__(inputs, outputs, encoder, preprocessor, name=name,
    <their own constructor arguments as keywords>)`; those keywords become the config, so `.keras`
    serialization and `with_preprocessor` come for free. Given raw text, `fit`, `evaluate` and `predict` run
    the preprocessor in `tf.data` on the host (`text_dataset`); given ids they behave as Keras'.

    Args:
        inputs: dict of Keras inputs (`id_inputs()`).
        outputs: the head's output tensor(s).
        encoder: BertEncoder. Kept as `self.encoder` and serialized in the config.
        preprocessor: BertPreprocessor or None. Kept as `self.preprocessor`; None means ids only.
        name: str or None. The Keras model name.
        **task_args: the subclass's own constructor arguments (stored in the config).

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> model = bert_keras.tasks.BertClassifier(encoder, 2)
        >>> isinstance(model, bert_keras.tasks.base.TaskModel), model.get_config()["num_classes"]
        (True, 2)
    """

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
        preprocessing and decoding. On JAX or PyTorch the model runs on the backend through a NumPy hand-off
        (backends.host_inference); the decoding around it stays TensorFlow. An export may shadow it on the
        instance, e.g. with a shape-bucketed, XLA-compiled call (savedmodels/xla.py)."""
        if on_tensorflow():
            return self(ids, training=False)
        pre = self.require_preprocessor()
        return host_inference(self, ids, pre.pad_id, pre.max_seq_length)

    def batch(self, ds: tf.data.Dataset, batch_size: int, drop_remainder: bool) -> tf.data.Dataset:
        """Unbatched (x, y) or x elements -> batches of raw inputs."""
        return ds.batch(batch_size, drop_remainder=drop_remainder)

    def slices(self, x, y=None):
        """Raw inputs (and targets) as given by a user -> what tf.data.Dataset.from_tensor_slices takes."""
        x = tuple(x) if isinstance(x, list) and x and isinstance(x[0], (list, tuple, np.ndarray)) else x
        return x if y is None else (x, y)

    # ---- raw text in -------------------------------------------------------------------------------------
    def require_preprocessor(self):
        """The preprocessor; a model without one raises ValueError saying how to load or attach one."""
        if self.preprocessor is None:
            raise ValueError(f"this {type(self).__name__} has no preprocessor, so it takes ids, not text (it was "
                             "saved by an older bert_keras or built without one): load it with "
                             "bert_keras.load_task_model(<its finetune folder>), which reads vocab.txt and "
                             "preprocessing.json beside it, then save it again; or pass preprocessor=...")
        return self.preprocessor

    def text_dataset(self, x, y=None, batch_size: int = 32, training: bool = False, seed: int = 0,
                     drop_remainder: bool | None = None, full_length: bool = False) -> tf.data.Dataset:
        """Raw inputs (arrays/lists, or a dataset of already batched raw (x, y) or x) -> a dataset of
        (id dict, targets) or id dicts, preprocessed on the host. Training data is reshuffled every epoch. With
        a fixed seq_length, training drops the last partial batch (default) and every shape is static (what a
        TPU needs); otherwise every example is kept, as Keras' fit does. On JAX and PyTorch batches are padded
        to a few lengths (backends.pad_batch_lengths), or all to max_seq_length with `full_length`."""
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
        if not on_tensorflow() and self.preprocessor.seq_length is None:    # a few static shapes for XLA
            ds = pad_batch_lengths(ds, self.preprocessor.pad_id, self.preprocessor.max_seq_length,
                                   self.target_padding, fixed=full_length)
        if drop_remainder and self.preprocessor.seq_length and not isinstance(x, tf.data.Dataset):
            from bert_keras.training.static_shapes import with_static_shapes
            ds = with_static_shapes(ds, batch_size)         # fixed by construction: let a TPU compile see it
        return ds.prefetch(tf.data.AUTOTUNE)

    target_padding = None     # targets with a sequence axis ([B, S]) are padded with this on JAX (backends.py)

    def after_preprocess(self, ds, batch_size, training, seed, drop_remainder):
        """Batches of (ids, targets) -> the batches to train on (SQuAD re-batches its windows here)."""
        return ds

    def _feed(self, x, y, batch_size, training):
        if not is_text(x):
            return x, y, batch_size
        return self.text_dataset(x, y, batch_size or 32, training), None, None

    def fit(self, x=None, y=None, batch_size=None, validation_data=None, resume: str | None = None,
            save_every: int | None = None, **kwargs):
        """Keras' fit, also on raw text (x as the task's raw inputs, y its targets), batched by `text_dataset`.

        With `resume` (a folder; on Colab, one on Google Drive), the run keeps resume points there, as
        `bert-keras finetune` does (training/resume.py: after every epoch, and every `save_every` steps or 10
        minutes within one): run the same cell again after a disconnect (the model built and compiled as before)
        and fit goes on at the last saved step, with the batches and dropout masks of the run never stopped; the
        folder is removed when fit ends. `x` is then raw text or a tf.data.Dataset of batches (not repeated).
        """
        if is_text(x):
            kwargs.setdefault("shuffle", False)        # text_dataset reshuffles every epoch itself
        x, y, batch_size = self._feed(x, y, batch_size, training=True)
        if validation_data is not None and is_text(validation_data[0] if isinstance(validation_data, tuple)
                                                    else validation_data):
            vx, vy = validation_data if isinstance(validation_data, tuple) else (validation_data, None)
            validation_data = self.text_dataset(vx, vy, 32, training=False)
        if resume is not None:
            return self._fit_resumable(x, resume, save_every, validation_data=validation_data, **kwargs)
        return super().fit(x, y, batch_size=batch_size, validation_data=validation_data, **kwargs)

    def _fit_resumable(self, data, folder: str, save_every: int | None, epochs: int = 1, callbacks=None,
                       **kwargs):
        """fit over `data` (batches, one pass an epoch) with a ResumeCheckpoint in `folder`: the passes repeated
        and the batches already trained skipped (the same ds.skip as finetune), from the epoch it was in."""
        from bert_keras.training.resume import ResumeCheckpoint
        from bert_keras.training.setup import build_from_spec
        if not isinstance(data, tf.data.Dataset) or int(data.cardinality()) < 1:
            raise ValueError("fit(resume=...) takes raw text or a tf.data.Dataset of a known number of batches "
                             "(not repeated): it counts an epoch's steps to resume within one")
        steps = int(data.cardinality())
        checkpoint = ResumeCheckpoint(folder, {"epochs": epochs, "steps_per_epoch": steps}, steps_per_epoch=steps,
                                      save_every=save_every, save_seconds=600)
        if self.optimizer is not None and not self.optimizer.built:
            self.optimizer.build(self.trainable_variables)
        done = checkpoint.restore(self)
        if checkpoint.step:
            print(f"resumed at step {checkpoint.step} ({folder})", flush=True)
        data = data.repeat().skip(checkpoint.step)
        build_from_spec(self, data.element_spec)     # JAX draws no batch to build; a resumed epoch's metrics load
        history = super().fit(data, epochs=epochs, steps_per_epoch=steps, initial_epoch=done,
                              callbacks=[*(callbacks or []), checkpoint], **kwargs)
        checkpoint.finish()
        return history

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """Keras' evaluate, also on raw text and targets."""
        x, y, batch_size = self._feed(x, y, batch_size, training=False)
        return super().evaluate(x, y, batch_size=batch_size, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """Keras' predict (logits), also on raw text; for decoded answers use the task's readable method. Per-token
        outputs of raw text: ragged [N, (S)] on TensorFlow (each batch's length), [N, max_seq_length] on JAX."""
        if is_text(x) and not on_tensorflow() and self.per_token_outputs():
            x = self.text_dataset(x, None, batch_size or 32, training=False, full_length=True)
        x, _, batch_size = self._feed(x, None, batch_size, training=False)
        return super().predict(x, batch_size=batch_size, **kwargs)

    def per_token_outputs(self) -> bool:
        """Does an output have the sequence axis ([B, S] span logits, [B, S, K] tag logits)?"""
        return len(self.inputs[0].shape) == 2 and any(
            len(o.shape) >= 2 and o.shape[1] is None for o in tf.nest.flatten(self.output))

    def with_preprocessor(self, preprocessor, **task_args):
        """A copy of this model (same weights) owning `preprocessor`, e.g. with another seq_length for an export;
        `task_args` change constructor arguments (label names, answer rules)."""
        config = {**self.get_config(), **task_args, "preprocessor": keras.saving.serialize_keras_object(preprocessor)}
        copy = type(self).from_config(config)
        copy.set_weights(self.get_weights())
        return copy

    predict_batch_size = 32          # examples per traced call of the readable methods (classify, answer, ...)

    def serve_numpy(self, *texts) -> dict:
        """`serve` on Python/NumPy text as one batch, traced once per input structure; tensors back as NumPy."""
        out = self.run_traced("serve", *(tf.constant(t, tf.string) for t in texts))
        return {k: v.numpy() for k, v in out.items()}

    def serve_batches(self, *texts, batch_size: int | None = None):
        """`serve` on Python/NumPy text, `batch_size` examples at a time (tf.data, prefetched): yields each
        batch's answer tensors as NumPy, in order. One trace for every batch and every call. A bare string is
        one example (`classify("a film")` is `classify(["a film"])`), not a sequence of characters."""
        yield from self.batched("serve", *examples(*texts), batch_size=batch_size)

    def batched(self, method: str, *inputs, batch_size: int | None = None):
        """self.<method> over `inputs` (arrays, lists or RaggedTensors with one row per example; nested lists
        become RaggedTensors), `batch_size` rows at a time through tf.data with prefetch; yields each batch's
        outputs (a dict) as NumPy. The method is traced once per input signature with the batch (and every
        other) dimension unknown, so neither the last smaller batch nor a second call traces again."""
        ds = tf.data.Dataset.from_tensor_slices(tuple(as_batch_input(x) for x in inputs))
        ds = ds.ragged_batch(batch_size or self.predict_batch_size).prefetch(tf.data.AUTOTUNE)
        for batch in ds:
            out = self.run_traced(method, *batch)
            yield {k: v.numpy() if isinstance(v, tf.Tensor) else v for k, v in out.items()}

    def run_traced(self, method: str, *args):
        """self.<method>(*args) through `traced(method)`, on the trace whose signature is args' with every
        dimension unknown (made once, then reused for any batch size and length)."""
        function = self.traced(method)
        return function.get_concrete_function(*(relaxed_spec(a) for a in args))(*args)

    def traced(self, method: str):
        """self.<method> as a tf.function kept on the model: traced once per input signature, not once per call
        (an evaluation every epoch reuses it). `run_traced` calls it with every dimension unknown."""
        name = f"_traced_{method}"
        if not hasattr(self, name):
            # Plain graph code (tensor-dependent steps are tf ops already): autograph would rewrite the task's,
            # TF.Text's and Keras' Python at every trace, which tripled a span labeler's first answer().
            setattr(self, name, tf.function(getattr(self, method), reduce_retracing=True, autograph=False))
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
        checkpoint's preprocessor (its vocab and casing).

        Args:
            name: str. A zoo name (`bert-keras zoo list`), a downloaded archive or a checkpoint folder.
            progress: bool. Print download progress.
            **task_args: the task model's own arguments (num_classes, label_names, ...).

        Example:
            >>> BertClassifier.from_preset("bert_base_uncased", num_classes=2)      # doctest: +SKIP
        """
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
