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
