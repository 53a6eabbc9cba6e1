"""What the packed-encoder tests share (tests/pretraining/test_packed_encoder.py on TensorFlow,
tests/on_jax/test_packed_parity.py in a JAX process): real instances padded and packed, the model's outputs per
sequence, the mutation, SGD steps. Past making the instances (TensorFlow's tf.data), keras.ops and NumPy only.
"""

import dataclasses

import keras
import numpy as np

from bert_keras import layers
from bert_keras.encoder import INPUT_NAMES, PACKED_INPUT_NAMES

SEQ, PRED = 160, 20                 # 2-sentence documents at 160 tokens: rows of 1, 2 and 3 sequences
STEPS = 20


def write_records(vocab: str, folder, pack: bool = False) -> list[str]:
    """google-research instances by create_pretraining_data (the `pretraining-data` code) from the shipped corpus
    as 2-sentence documents, written to folder/instances-*.tfrecord (`pack`: as packed rows) -> the files."""
    from bert_keras import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig, create_pretraining_data
    from conftest import FIXTURES
    lines = [line.strip() for line in open(FIXTURES / "pretraining_corpus.txt", encoding="utf-8") if line.strip()]
    corpus = folder / "documents.txt"
    corpus.write_text("".join("\n".join(lines[i:i + 2]) + "\n\n" for i in range(0, len(lines), 2)), encoding="utf-8")
    made = create_pretraining_data([str(corpus)], BertPreprocessor(vocab), str(folder / "instances"), 1,
                                   MaskingConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED, short_seq_prob=0.5,
                                                 dupe_factor=1), seed=1, workers=1, pack=pack)
    return made["files"]


def make_instances(vocab: str, folder) -> dict:
    """write_records' instances -> {name: [N, k] array} (records.feature_spec's features)."""
    import tensorflow as tf

    from bert_keras.pretraining.records import feature_spec
    spec = feature_spec(SEQ, PRED)
    batches = [tf.io.parse_example(b, spec) for b in tf.data.TFRecordDataset(write_records(vocab, folder)).batch(512)]
    return {name: np.concatenate([b[name].numpy() for b in batches]) for name in spec}


def both_ways(instances: dict, rows: np.ndarray) -> tuple:
    """The instances `rows` holds as a batch of padded rows and as a batch of packed rows: ((x, y), (x, y)) with
    NumPy values, the instances in the same order both ways (row by row, as each row holds them)."""
    from bert_keras.pretraining.dataset import model_batch
    from bert_keras.pretraining.packed_records import pack_instances, packed_prediction_slots
    order = rows[rows >= 0]
    unpacked = {name: values[order] for name, values in instances.items()}
    packed = pack_instances(instances, rows, packed_prediction_slots(SEQ, PRED, 0.15))   # MaskingConfig's rate
    return tuple(tuple({k: np.asarray(v) for k, v in part.items()} for part in model_batch(features))
                 for features in (unpacked, packed))


def per_sequence_tensors(model, x, y) -> dict:
    """The model's outputs on (x, y) as tensors, in one traceable function: the encoder's sequence_output, the
    MLM and NSP logits and the loss (model.compute_loss)."""
    outputs = model(x)
    encoder_inputs = {k: v for k, v in x.items() if k in INPUT_NAMES + PACKED_INPUT_NAMES}
    return {"sequence": model.encoder(encoder_inputs)["sequence_output"], "mlm": outputs["mlm_logits"],
            "nsp": outputs["nsp_logits"], "loss": model.compute_loss(x, y, outputs)}


def per_sequence(model, batch, run=per_sequence_tensors) -> dict:
    """The model's outputs on (x, y), per sequence in order: "sequence" [T, H] (the encoder's vectors at every real
    token), "mlm" [P, V] (logits of every real prediction), "nsp" [N, 2] and the loss. `run`: per_sequence_tensors
    or a compiled form of it."""
    x, y = batch
    out = {k: keras.ops.convert_to_numpy(v) for k, v in run(model, x, y).items()}
    nsp = out["nsp"]
    if nsp.ndim == 3:                                                        # packed: [R, K, 2] -> the present ones
        nsp = nsp[y["next_sentence_weights"] > 0]
    return {"sequence": out["sequence"][x["input_mask"] > 0], "mlm": out["mlm"][y["masked_lm_weights"] > 0],
            "nsp": nsp, "loss": float(out["loss"])}


def crossing_attention(packed_sequence_ids):
    """The mutation: a packed row's tokens attend to every real token of the row, whatever their sequence."""
    return layers.attention_bias(keras.ops.cast(keras.ops.greater(packed_sequence_ids, 0), "int32"))


def training_batches(instances: dict, rows: np.ndarray, steps: int) -> list:
    """`steps` pairs of rows holding 4 sequences each (2 + 2 or 3 + 1), so every step has the same shapes both ways
    (JAX compiles once) -> [((x, y) unpacked, (x, y) packed)]."""
    count = (rows >= 0).sum(1)
    pairs = [(a, b) for a, b in zip(np.flatnonzero(count == 2)[0::2], np.flatnonzero(count == 2)[1::2])]
    pairs += list(zip(np.flatnonzero(count == 3), np.flatnonzero(count == 1)))
    assert len(pairs) >= steps, len(pairs)
    return [both_ways(instances, rows[list(pair)]) for pair in pairs[:steps]]


def train(model, batches) -> tuple[list, list]:
    """SGD steps, one a batch -> (each step's loss, the weights after them)."""
    losses = [float(model.train_on_batch(x, y, return_dict=True)["loss"]) for x, y in batches]
    return losses, [np.asarray(w) for w in model.get_weights()]


def tiny_pretrainer():
    """bert_tiny with dropout off and seeded random weights, as a pretrainer."""
    from bert_keras import PRESETS, BertEncoder
    from bert_keras.tasks import BertPretrainer
    keras.utils.set_random_seed(0)
    config = dataclasses.replace(PRESETS["bert_tiny"], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertPretrainer(BertEncoder(config))


def sgd(model, backend: str):
    model.compile(optimizer=keras.optimizers.SGD(0.1), jit_compile=backend != "tensorflow")
    return model


def forward_rows(rows: np.ndarray) -> np.ndarray:
    """10 rows for the forward comparison: 4 of 3 sequences, 4 of 2, 2 of 1 (22 sequences)."""
    count = (rows >= 0).sum(1)
    chosen = np.concatenate([np.flatnonzero(count == 3)[:4], np.flatnonzero(count == 2)[:4],
                             np.flatnonzero(count == 1)[:2]])
    assert len(chosen) == 10
    return rows[np.sort(chosen)]


def assert_same_per_sequence(unpacked: dict, packed: dict) -> None:
    for name in ("sequence", "mlm", "nsp"):
        assert packed[name].shape == unpacked[name].shape, name
        np.testing.assert_allclose(packed[name], unpacked[name], rtol=0, atol=1e-5, err_msg=name)
    assert abs(packed["loss"] - unpacked["loss"]) <= 1e-6 * abs(unpacked["loss"]), (packed["loss"], unpacked["loss"])
