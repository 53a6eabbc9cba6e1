"""Model Garden TF2 checkpoints, made by the Model Garden's own converter and read by its own BertEncoder."""

import numpy as np
import pytest

from bert_keras import BertConfig, BertEncoder, load_checkpoint, save_google_checkpoint
from bert_keras.checkpoints.names import encoder_weights

import official  # noqa: E402  (the [garden] extra, which make test installs)

CONFIG = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, max_position_embeddings=24)


@pytest.fixture(scope="module")
def garden_checkpoint(tmp_path_factory):
    """Our TF1 export, converted to an object-based TF2 checkpoint by Model Garden's converter."""
    from official.legacy.bert import configs
    from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter
    tmp = tmp_path_factory.mktemp("garden")
    encoder = BertEncoder(CONFIG)
    prefix = save_google_checkpoint(encoder, str(tmp / "tf1"))
    converter.convert_checkpoint(configs.BertConfig.from_json_file(str(tmp / "tf1" / "bert_config.json")),
                                 str(tmp / "tf2" / "bert_model.ckpt"), prefix, checkpoint_model_name="encoder")
    (tmp / "tf2" / "bert_config.json").write_text((tmp / "tf1" / "bert_config.json").read_text())
    return encoder, tmp / "tf2"


def test_garden_checkpoint_imports_exactly(garden_checkpoint):
    encoder, folder = garden_checkpoint
    config, loaded = load_checkpoint(str(folder))
    assert config == CONFIG
    want, got = encoder_weights(encoder), encoder_weights(loaded)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_garden_bert_encoder_agrees_with_ours(garden_checkpoint):
    import tensorflow as tf
    from bert_keras.checkpoints.garden import garden_bert_encoder
    encoder, folder = garden_checkpoint
    garden = garden_bert_encoder(CONFIG)
    tf.train.Checkpoint(encoder=garden).read(tf.train.latest_checkpoint(str(folder))).assert_existing_objects_matched()
    rng = np.random.default_rng(0)
    x = {"input_word_ids": rng.integers(1, 60, (2, 10)).astype("int32"),
         "input_mask": np.array([[1] * 10, [1] * 6 + [0] * 4], "int32"),
         "input_type_ids": np.array([[0] * 5 + [1] * 5, [0] * 10], "int32")}
    theirs, ours = garden(x), encoder(x)
    mask = x["input_mask"][..., None]
    diff = np.abs((np.asarray(theirs["sequence_output"]) - np.asarray(ours["sequence_output"])) * mask).max()
    print(f"Model Garden BertEncoder vs ours: max abs diff {diff:.2e}")
    assert diff <= 1e-5
    np.testing.assert_allclose(theirs["pooled_output"], ours["pooled_output"], atol=1e-5)


def test_a_fine_tuned_garden_classifier_opens_as_a_bert_classifier(tmp_path, capsys):
    """The Model Garden's own BertClassifier, trained a step, saved as its trainer does (model and optimizer in one
    tf.train.Checkpoint): it opens as our BertClassifier (load_task_model, convert --out) with its logits."""
    import tensorflow as tf
    import tf_keras
    from official.nlp.modeling import models

    from bert_keras.checkpoints.garden import garden_bert_encoder
    from bert_keras.tasks import BertClassifier, load_task_model
    from bert_keras_cli.main import main
    tf_keras.utils.set_random_seed(0)
    garden = models.BertClassifier(garden_bert_encoder(CONFIG), num_classes=3)
    rng = np.random.default_rng(0)
    x = {"input_word_ids": rng.integers(5, 60, (2, 10)).astype("int32"),
         "input_mask": np.array([[1] * 10, [1] * 6 + [0] * 4], "int32"),
         "input_type_ids": np.array([[0] * 5 + [1] * 5, [0] * 10], "int32")}
    optimizer = tf_keras.optimizers.Adam(1e-2)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy([0, 2], garden(x), from_logits=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, garden.trainable_variables), garden.trainable_variables))
    run = tmp_path / "run"
    tf.train.Checkpoint(model=garden, optimizer=optimizer).save(str(run / "ckpt"))
    CONFIG.to_json_file(str(run / "bert_config.json"))
    (run / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                                             + [f"w{i}" for i in range(55)]) + "\n")
    model = load_task_model(str(run))
    assert isinstance(model, BertClassifier) and model.label_names == ["0", "1", "2"]
    np.testing.assert_allclose(model(x), garden(x, training=False), atol=1e-5)
    assert main(["convert", "--checkpoint", str(run), "--out", str(tmp_path / "c.keras")]) == 0
    np.testing.assert_allclose(load_task_model(str(tmp_path / "c.keras"))(x), garden(x, training=False), atol=1e-5)
    assert "BertClassifier (0, 1, 2)" in capsys.readouterr().out
