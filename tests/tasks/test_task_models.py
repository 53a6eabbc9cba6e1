import keras
import numpy as np
import pytest

from bert_keras import BertConfig, BertEncoder
from bert_keras.tasks import BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTagger

CONFIG = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)


def _ids(shape, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 30, size=shape).astype("int32")
    ids[..., 0], ids[..., -1] = 2, 0          # [CLS] first, one padding position last
    mask = (ids > 0).astype("int32")
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros(shape, "int32")}


@pytest.mark.parametrize("make,inputs,shape", [
    (lambda e: BertClassifier(e, 3), _ids((4, 8)), (4, 3)),
    (lambda e: BertTagger(e, 5), _ids((4, 8)), (4, 8, 5)),
    (lambda e: BertMultipleChoice(e), _ids((4, 3, 8)), (4, 3)),
])
def test_outputs_and_keras_round_trip(make, inputs, shape, tmp_path):
    model = make(BertEncoder(CONFIG))
    out = model(inputs)
    assert out.shape == shape and out.dtype == "float32"
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras", safe_mode=True)
    np.testing.assert_array_equal(again(inputs), out)


def test_span_labeler_outputs_start_and_end_per_token(tmp_path):
    model = BertSpanLabeler(BertEncoder(CONFIG))
    x = _ids((2, 8))
    out = model(x)
    assert out["start_logits"].shape == (2, 8) and out["end_logits"].shape == (2, 8)
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras")(x)
    np.testing.assert_array_equal(again["end_logits"], out["end_logits"])


def test_span_loss_does_not_depend_on_how_the_batch_was_padded():
    # Per-batch padding makes the padded length depend on the other windows: the softmax over positions must
    # give padding no weight, so 4 more padding positions leave the loss (and the real logits) unchanged.
    model = BertSpanLabeler(BertEncoder(CONFIG))
    x = _ids((2, 8))
    longer = {k: np.pad(v, ((0, 0), (0, 4))) for k, v in x.items()}
    labels = np.array([3, 5])
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    a, b = model(x), model(longer)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(np.asarray(b[name])[:, :8] * x["input_mask"], np.asarray(a[name]) * x["input_mask"],
                                   atol=1e-5)
        np.testing.assert_allclose(float(ce(labels, b[name])), float(ce(labels, a[name])), rtol=1e-6)


def test_multiple_choice_scores_each_pair_alone_and_permutes_with_the_choices():
    model = BertMultipleChoice(BertEncoder(CONFIG))
    x = _ids((2, 4, 8))
    logits = np.asarray(model(x))
    alone = np.asarray(model({k: v[1:2, 2:3] for k, v in x.items()}))
    np.testing.assert_allclose(alone[0, 0], logits[1, 2], atol=1e-5)
    order = [3, 0, 2, 1]
    np.testing.assert_allclose(np.asarray(model({k: v[:, order] for k, v in x.items()})), logits[:, order], atol=1e-5)


def test_classifier_learns_a_token_presence_rule():
    # label = 1 when token 7 appears: a rule the encoder can learn in a few hundred steps.
    rng = np.random.default_rng(1)
    x = _ids((256, 8), seed=1)
    x["input_word_ids"][:, 1:-1] = rng.choice([5, 6, 8, 9], size=(256, 6))
    labels = rng.integers(0, 2, size=256)
    x["input_word_ids"][labels == 1, 3] = 7
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertEncoder(CONFIG), 2, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = model.fit(x, labels, epochs=8, batch_size=32, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    assert history.history["accuracy"][-1] > 0.9


def test_pooled_heads_keep_the_encoder_as_one_saved_node(tmp_path):
    """The classifier and multiple-choice heads call `encoder(inputs, pooled_only=True)` (only [CLS] in the last
    layer); the encoder must stay one node, so their weights keep the layout earlier versions saved
    (layers/bert_encoder/...) and those files still load."""
    import zipfile

    import h5py
    model = BertClassifier(BertEncoder(CONFIG), num_classes=2)
    model.save(tmp_path / "c.keras")
    with zipfile.ZipFile(tmp_path / "c.keras") as z:
        z.extract("model.weights.h5", tmp_path)
    with h5py.File(tmp_path / "model.weights.h5") as f:
        assert "layers/bert_encoder/layers/transformer_block/vars" in f


@pytest.mark.parametrize("make,head", [(lambda e: BertClassifier(e, 512), "logits"),
                                       (lambda e: BertTagger(e, 512), "logits")])
def test_heads_start_as_transformers_heads_do(make, head):
    """transformers' BertFor* heads start at Normal(0, initializer_range) with zero bias (its _init_weights); a
    truncated normal (google-research's) has 0.88x the spread and nothing past 2 standard deviations."""
    config = BertConfig(vocab_size=30, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    keras.utils.set_random_seed(0)
    kernel, bias = make(BertEncoder(config)).get_layer(head).get_weights()
    std = config.initializer_range
    assert kernel.shape == (64, 512) and not bias.any()
    assert abs(kernel.mean()) < 0.02 * std and abs(kernel.std() / std - 1) < 0.02     # 32,768 seeded draws
    beyond = np.mean(np.abs(kernel) > 2 * std)          # 4.55% for a normal, 0 for a truncated normal
    assert 0.035 < beyond < 0.056
