"""What every task model shares: the id inputs, a float32 dense head, and serialization of the nested encoder."""

from __future__ import annotations

import keras

from bert_keras.encoder import INPUT_NAMES


def id_inputs(rank: int = 2) -> dict:
    """Keras inputs for the id dict: [B, S] (rank 2) or [B, choices, S] (rank 3), int32."""
    return {name: keras.Input(shape=(None,) * (rank - 1), dtype="int32", name=name) for name in INPUT_NAMES}


def dense_head(units: int, initializer_range: float, name: str) -> keras.layers.Dense:
    # float32 logits: cross-entropy on bfloat16 logits loses the small differences fine-tuning needs.
    return keras.layers.Dense(units, name=name, dtype="float32",
                              kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))


class TaskModel(keras.Model):
    """A functional model over a BertEncoder; subclasses call `super().__init__(inputs, outputs, encoder=...,
    <their own constructor arguments>)` and get `.keras` serialization (encoder nested) for free."""

    def __init__(self, inputs, outputs, encoder, name=None, **task_args):
        super().__init__(inputs=inputs, outputs=outputs, name=name)
        self.encoder = encoder
        self._task_args = task_args

    def get_config(self):
        return {"encoder": keras.saving.serialize_keras_object(self.encoder), **self._task_args, "name": self.name}

    def get_metrics_result(self):
        results = super().get_metrics_result()
        # tensorflow/tensorflow#72388: under MultiWorkerMirroredStrategy Keras 3 averages each step's logs across
        # workers with strategy.reduce("MEAN", v, axis=0), which fails on scalars; shape [1] averages the same.
        import tensorflow as tf
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
        """The task model on a released checkpoint (a zoo name, an archive or a checkpoint folder), e.g.
        `BertClassifier.from_preset("bert_base_uncased", num_classes=2)`. Returns (model, preprocessor)."""
        from bert_keras.zoo import from_preset
        encoder, preprocessor = from_preset(name, progress=progress)
        return cls(encoder, **task_args), preprocessor

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
