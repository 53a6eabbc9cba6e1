"""google-research TF1 checkpoints: the real index's names, a lossless round trip, the original loader."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras import BertConfig, BertEncoder, load_checkpoint, read_checkpoint, save_google_checkpoint
from bert_keras.checkpoints.google import write_google_checkpoint
from bert_keras.checkpoints.names import HEAD_NAMES, encoder_variables, encoder_weights
from conftest import FIXTURES

TINY = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=20)


def _heads(config, seed=1):
    rng = np.random.default_rng(seed)
    h, v = config.hidden_size, config.vocab_size
    shapes = {"cls/predictions/transform/dense/kernel": (h, h), "cls/predictions/transform/dense/bias": (h,),
              "cls/predictions/transform/LayerNorm/gamma": (h,), "cls/predictions/transform/LayerNorm/beta": (h,),
              "cls/predictions/output_bias": (v,), "cls/seq_relationship/output_weights": (2, h),
              "cls/seq_relationship/output_bias": (2,)}
    return {k: rng.normal(size=s).astype("float32") for k, s in shapes.items()}


def test_names_and_shapes_match_a_released_checkpoint_index():
    # The real index of google-research's bert_uncased_L-8_H-512_A-8 (its 142 names and shapes, no data).
    folder = FIXTURES / "google_L8_H512_A8"
    released = dict(tf.train.list_variables(str(folder / "bert_model.ckpt")))
    assert len(released) == 142
    encoder = BertEncoder(BertConfig.from_json_file(str(folder / "bert_config.json")))
    ours = {name: list(v.shape) for name, v in encoder_variables(encoder).items()}
    assert ours == {k: v for k, v in released.items() if not k.startswith("cls/")}
    assert {k for k in released if k.startswith("cls/")} == set(HEAD_NAMES)


def test_round_trip_is_lossless_and_keeps_heads(tmp_path):
    encoder = BertEncoder(TINY)
    heads = _heads(TINY)
    save_google_checkpoint(encoder, str(tmp_path / "a"), heads=heads)
    config, loaded = load_checkpoint(str(tmp_path / "a"))
    assert config == TINY
    save_google_checkpoint(loaded, str(tmp_path / "b"), heads=read_checkpoint(str(tmp_path / "a"))[1])
    a = tf.train.load_checkpoint(str(tmp_path / "a" / "bert_model.ckpt"))
    b = tf.train.load_checkpoint(str(tmp_path / "b" / "bert_model.ckpt"))
    names = a.get_variable_to_shape_map()
    assert set(names) == set(b.get_variable_to_shape_map()) and len(names) == 5 + 2 * 16 + 2 + 7
    for name in names:
        np.testing.assert_array_equal(a.get_tensor(name), b.get_tensor(name), err_msg=name)
    for name, value in heads.items():
        np.testing.assert_array_equal(a.get_tensor(name), value)
    x = {"input_word_ids": np.array([[2, 7, 9, 3]], "int32"), "input_mask": np.ones((1, 4), "int32"),
         "input_type_ids": np.array([[0, 0, 1, 1]], "int32")}
    np.testing.assert_array_equal(encoder(x)["sequence_output"], loaded(x)["sequence_output"])


def test_written_checkpoint_loads_with_the_original_tf1_mechanism(tmp_path):
    """google-research/bert restores with tf.compat.v1.train.init_from_checkpoint into get_variable names."""
    encoder = BertEncoder(TINY)
    prefix = save_google_checkpoint(encoder, str(tmp_path / "ckpt"))
    want = encoder_weights(encoder)
    graph = tf.Graph()
    with graph.as_default():
        variables = {n: tf.compat.v1.get_variable(n, shape=v.shape, dtype=tf.float32) for n, v in want.items()}
        tf.compat.v1.train.init_from_checkpoint(prefix, {n: n for n in want})
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            got = session.run(variables)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_optimizer_slots_and_global_step_are_skipped(tmp_path):
    weights = encoder_weights(BertEncoder(TINY))
    extra = {f"{n}/adam_m": np.full_like(v, 7.0) for n, v in weights.items()}     # slots unlike any weight
    write_google_checkpoint({**weights, **extra, "global_step": np.int64(7)}, str(tmp_path / "c"), config=TINY)
    _, loaded = load_checkpoint(str(tmp_path / "c"))
    got = encoder_weights(loaded)
    assert sorted(got) == sorted(weights)                       # no slot and no step became a weight
    for name, value in weights.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_mismatches_fail_naming_the_variable(tmp_path):
    weights = encoder_weights(BertEncoder(TINY))
    missing = dict(weights)
    del missing["bert/encoder/layer_1/output/dense/kernel"]
    write_google_checkpoint(missing, str(tmp_path / "missing"), config=TINY)
    with pytest.raises(ValueError, match="missing from .*bert/encoder/layer_1/output/dense/kernel"):
        load_checkpoint(str(tmp_path / "missing"))

    write_google_checkpoint({**weights, "bert/encoder/layer_9/output/dense/bias": np.zeros(16, "float32")},
                            str(tmp_path / "extra"), config=TINY)
    with pytest.raises(ValueError, match="not in a BertEncoder .*layer_9/output/dense/bias"):
        load_checkpoint(str(tmp_path / "extra"))

    wrong = BertConfig(**{**TINY.to_dict(), "intermediate_size": 48})
    write_google_checkpoint(weights, str(tmp_path / "shape"), config=wrong)
    with pytest.raises(ValueError, match=r"shape of bert/encoder/layer_0/intermediate/dense/bias.*\(32,\).*\(48,\)"):
        load_checkpoint(str(tmp_path / "shape"))


def test_missing_files_say_what_is_expected(tmp_path):
    with pytest.raises(FileNotFoundError, match="bert_model.ckpt.index"):
        load_checkpoint(str(tmp_path))
    write_google_checkpoint(encoder_weights(BertEncoder(TINY)), str(tmp_path / "noconfig"))
    with pytest.raises(FileNotFoundError, match="bert_config.json"):
        load_checkpoint(str(tmp_path / "noconfig"))


def test_a_checkpoint_missing_or_cutting_short_its_data_file_is_named(tmp_path):
    # The released index without its data file (a download stopped after the .index): named, not TF's OpError.
    with pytest.raises(FileNotFoundError, match=r"is incomplete: .*bert_model\.ckpt\.data-00000-of-00001.*download"):
        load_checkpoint(str(FIXTURES / "google_L8_H512_A8"))
    save_google_checkpoint(BertEncoder(TINY), str(tmp_path / "cut"))
    [data] = (tmp_path / "cut").glob("bert_model.ckpt.data-*")
    data.write_bytes(data.read_bytes()[:data.stat().st_size // 2])
    with pytest.raises(ValueError, match="cannot be read .*cut short"):           # TF's reader: an IndexError
        load_checkpoint(str(tmp_path / "cut"))


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    with pytest.raises(Exception):
        write_google_checkpoint({"bert/x": object()}, str(tmp_path / "bad"))
    assert list(tmp_path.iterdir()) == []


def test_a_run_classifier_checkpoint_opens_as_a_bert_classifier(tmp_path, minilm_vocab):
    """google-research run_classifier.py saves its head as `output_weights` [num_labels, hidden] and `output_bias`
    (and Adam's slots, global_step): the checkpoint opens as a BertClassifier, logits = pooled @ W^T + b."""
    from bert_keras.tasks import BertClassifier, load_task_model
    config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=20)
    encoder = BertEncoder(config)
    rng = np.random.default_rng(0)
    head = {"output_weights": rng.normal(size=(3, 16)).astype("float32"),
            "output_bias": rng.normal(size=(3,)).astype("float32")}
    tensors = {**encoder_weights(encoder), **head, "global_step": np.int64(7),
               "output_weights/adam_m": np.zeros((3, 16), "float32")}
    write_google_checkpoint(tensors, str(tmp_path / "run"), config=config, vocab_file=minilm_vocab)
    model = load_task_model(str(tmp_path / "run"))
    assert isinstance(model, BertClassifier) and model.label_names == ["0", "1", "2"]
    ids = model.preprocessor(["a fine film", "dull"])
    pooled = np.asarray(encoder(ids, pooled_only=True))
    np.testing.assert_allclose(model(ids), pooled @ head["output_weights"].T + head["output_bias"], atol=1e-5)
    _, loaded = load_checkpoint(str(tmp_path / "run"))            # the encoder alone, the head left aside
    np.testing.assert_array_equal(loaded.pooler.kernel, encoder.pooler.kernel)
