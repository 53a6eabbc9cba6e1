"""TF Hub's own BERT tutorials, run unchanged on `export-hub`'s SavedModels in place of tfhub.dev's
bert_en_uncased_preprocess/3 and a BERT encoder: tensorflow_hub's hub.KerasLayer / hub.load with tf_keras (Keras 2,
TF_USE_LEGACY_KERAS=1, as the tutorials need under TF 2.16+), in a fresh process.

  classify_text_with_bert  (tensorflow/text docs/tutorials/classify_text_with_bert.ipynb): text Input ->
      hub.KerasLayer(preprocessor) -> hub.KerasLayer(encoder, trainable=True)['pooled_output'] -> Dropout -> Dense(1);
      fit, model.save(include_optimizer=False), tf.saved_model.load, the reloaded model and its serving_default
      predict what the trained model does.
  bert_glue  ("Solve GLUE tasks using BERT on TPU", docs/tutorials/bert_glue.ipynb): hub.load(preprocessor),
      .tokenize, .bert_pack_inputs([tok, tok], tf.constant(20)), make_bert_preprocess_model (KerasLayer(tokenize),
      KerasLayer(bert_pack_inputs, arguments=dict(seq_length=...))) mapped over a tf.data pipeline, the encoder
      fine-tuned, the export with preprocessing and its reload; the packed ids against HF tokenizers and TF Hub's
      packing (test_hub_preprocessor.tf_hub_pack), at seq_length 64 and 32 and with 3 segments.

Needs `tensorflow_hub` and `tf_keras` (`make test-hub` installs them; both come with the [garden] extra too).
A random bert_tiny with the MiniLM vocabulary keeps it fast; nothing is downloaded."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.config import PRESETS
from bert_keras.encoder import BertEncoder
from bert_keras.preprocessing import BertPreprocessor
from savedmodels.hub import export_hub_style
from test_hub_preprocessor import hf_word_groups, sst2_sentences, tf_hub_pack, tf_hub_tokenize

pytestmark = pytest.mark.hub           # the [hub] extra: `make test-hub` installs it; the default tiers deselect


@pytest.fixture(scope="module", autouse=True)
def hub_extra():
    import importlib.util
    missing = [m for m in ("tensorflow_hub", "tf_keras") if importlib.util.find_spec(m) is None]
    assert not missing, f"{', '.join(missing)} missing: pip install -e '.[hub]' (make test-hub does)"

PRELUDE = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text as text  # noqa: F401  (registers the TF.Text ops)
assert tf.keras.__name__.startswith("tf_keras"), tf.keras.__name__           # Keras 2, as hub.KerasLayer needs
cfg = json.load(sys.stdin)
tfhub_handle_preprocess, tfhub_handle_encoder = cfg["preprocessor"], cfg["encoder"]
tf.keras.utils.set_random_seed(0)
out = {}
"""

CLASSIFY_TEXT_WITH_BERT = PRELUDE + r"""
def build_classifier_model():
    text_input = tf.keras.layers.Input(shape=(), dtype=tf.string, name='text')
    preprocessing_layer = hub.KerasLayer(tfhub_handle_preprocess, name='preprocessing')
    encoder_inputs = preprocessing_layer(text_input)
    encoder = hub.KerasLayer(tfhub_handle_encoder, trainable=True, name='BERT_encoder')
    outputs = encoder(encoder_inputs)
    net = outputs['pooled_output']
    net = tf.keras.layers.Dropout(0.1)(net)
    net = tf.keras.layers.Dense(1, activation=None, name='classifier')(net)
    return tf.keras.Model(text_input, net)

classifier_model = build_classifier_model()
bert_raw_result = classifier_model(tf.constant(['this is such an amazing movie!']))
out["raw_shape"] = bert_raw_result.shape.as_list()

train_ds = tf.data.Dataset.from_tensor_slices((cfg["sentences"], cfg["labels"])).batch(32)
loss = tf.keras.losses.BinaryCrossentropy(from_logits=True)
metrics = tf.metrics.BinaryAccuracy()
optimizer = tf.keras.optimizers.AdamW(learning_rate=5e-5)
classifier_model.compile(optimizer=optimizer, loss=loss, metrics=metrics)
encoder = classifier_model.get_layer('BERT_encoder')
before = [v.numpy() for v in encoder.trainable_weights]
history = classifier_model.fit(x=train_ds, epochs=1, verbose=0)
out["encoder_weights"] = len(encoder.trainable_weights)
out["encoder_weights_changed"] = sum(not np.array_equal(b, v.numpy())
                                    for b, v in zip(before, encoder.trainable_weights))
out["loss"] = history.history["loss"]

examples = ['this is such an amazing movie!', 'The movie was great!', 'The movie was meh.',
            'The movie was okish.', 'The movie was terrible...']
original_results = tf.sigmoid(classifier_model(tf.constant(examples)))
classifier_model.save(cfg["save_path"], include_optimizer=False)
reloaded_model = tf.saved_model.load(cfg["save_path"])
reloaded_results = tf.sigmoid(reloaded_model(tf.constant(examples)))
serving_results = reloaded_model.signatures['serving_default'](tf.constant(examples))
serving_results = tf.sigmoid(serving_results['classifier'])
out.update(original=original_results.numpy().tolist(), reloaded=reloaded_results.numpy().tolist(),
           serving=serving_results.numpy().tolist())
print(json.dumps(out))
"""

BERT_GLUE = PRELUDE + r"""
bert_preprocess = hub.load(tfhub_handle_preprocess)
tok = bert_preprocess.tokenize(tf.constant(['Hello TensorFlow!']))
out["tok"] = tok.to_list()
text_preprocessed = bert_preprocess.bert_pack_inputs([tok, tok], tf.constant(20))
out["pack20"] = {k: v.numpy().tolist() for k, v in text_preprocessed.items()}

def make_bert_preprocess_model(sentence_features, seq_length=128):
    input_segments = [tf.keras.layers.Input(shape=(), dtype=tf.string, name=ft) for ft in sentence_features]
    bert_preprocess = hub.load(tfhub_handle_preprocess)
    tokenizer = hub.KerasLayer(bert_preprocess.tokenize, name='tokenizer')
    segments = [tokenizer(s) for s in input_segments]
    truncated_segments = segments
    packer = hub.KerasLayer(bert_preprocess.bert_pack_inputs, arguments=dict(seq_length=seq_length), name='packer')
    model_inputs = packer(truncated_segments)
    return tf.keras.Model(input_segments, model_inputs)

test_preprocess_model = make_bert_preprocess_model(['my_input1', 'my_input2'])
test_text = [np.array(['some random test sentence']), np.array(['another sentence'])]
text_preprocessed = test_preprocess_model(test_text)
out["test_preprocess"] = {k: v.numpy().tolist() for k, v in text_preprocessed.items()}

# The packed ids of this test's batches, through the same Keras layers: pairs at 64 and 32, triples at 32.
a, b, c = (tf.constant(s) for s in cfg["segments"])
for name, features, segs, n in (("pairs64", ["a", "b"], [a, b], 64), ("pairs32", ["a", "b"], [a, b], 32),
                                ("triples32", ["a", "b", "c"], [a, b, c], 32)):
    packed = make_bert_preprocess_model(features, seq_length=n)(segs)
    out[name] = {k: v.numpy().tolist() for k, v in packed.items()}
# The tokenizer's words, and tok_a / tok_b packed by hub.KerasLayer(bert_pack_inputs) eagerly.
tok_a, tok_b = bert_preprocess.tokenize(a), bert_preprocess.tokenize(b)
out["tok_a"] = tok_a.to_list()
eager = hub.KerasLayer(bert_preprocess.bert_pack_inputs, arguments=dict(seq_length=64))([tok_a, tok_b])
out["eager64"] = {k: v.numpy().tolist() for k, v in eager.items()}

def build_classifier_model(num_classes):
    inputs = dict(
        input_word_ids=tf.keras.layers.Input(shape=(None,), dtype=tf.int32),
        input_mask=tf.keras.layers.Input(shape=(None,), dtype=tf.int32),
        input_type_ids=tf.keras.layers.Input(shape=(None,), dtype=tf.int32),
    )
    encoder = hub.KerasLayer(tfhub_handle_encoder, trainable=True, name='encoder')
    net = encoder(inputs)['pooled_output']
    net = tf.keras.layers.Dropout(rate=0.1)(net)
    net = tf.keras.layers.Dense(num_classes, activation=None, name='classifier')(net)
    return tf.keras.Model(inputs, net, name='prediction')

sentence_features = ['sentence1', 'sentence2']
bert_preprocess_model = make_bert_preprocess_model(sentence_features, seq_length=64)
in_memory = {'sentence1': cfg["segments"][0], 'sentence2': cfg["segments"][1], 'label': cfg["labels"]}
dataset = tf.data.Dataset.from_tensor_slices(in_memory).batch(16)
dataset = dataset.map(lambda ex: (bert_preprocess_model(ex), ex['label']))
dataset = dataset.cache().prefetch(buffer_size=tf.data.AUTOTUNE)
classifier_model = build_classifier_model(2)
loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
metrics = tf.keras.metrics.SparseCategoricalAccuracy('accuracy', dtype=tf.float32)
classifier_model.compile(optimizer=tf.keras.optimizers.AdamW(learning_rate=5e-5), loss=loss, metrics=[metrics])
history = classifier_model.fit(x=dataset, epochs=1, verbose=0)
out["loss"] = history.history["loss"]

preprocess_inputs = bert_preprocess_model.inputs
bert_encoder_inputs = bert_preprocess_model(preprocess_inputs)
bert_outputs = classifier_model(bert_encoder_inputs)
model_for_export = tf.keras.Model(preprocess_inputs, bert_outputs)
model_for_export.save(cfg["save_path"], include_optimizer=False)
reloaded_model = tf.saved_model.load(cfg["save_path"])
test_row = [tf.constant(cfg["segments"][0][:4]), tf.constant(cfg["segments"][1][:4])]
out["exported"] = model_for_export(test_row).numpy().tolist()
out["reloaded"] = reloaded_model(test_row).numpy().tolist()
serving_model = reloaded_model.signatures['serving_default']
out["serving"] = serving_model(sentence1=test_row[0], sentence2=test_row[1])['prediction'].numpy().tolist()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory, minilm_vocab):
    keras.utils.set_random_seed(5)
    out = tmp_path_factory.mktemp("hub_tutorials") / "export"
    return export_hub_style(BertEncoder(PRESETS["bert_tiny"]), BertPreprocessor(minilm_vocab), str(out), 128)


def run_tutorial(script: str, config: dict) -> dict:
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run([sys.executable, "-c", script], input=json.dumps(config), capture_output=True,
                            text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_classify_text_with_bert(exported, tmp_path):
    sentences = sst2_sentences(64)
    labels = [float(i % 2) for i in range(64)]          # the labels do not matter here; the plumbing does
    got = run_tutorial(CLASSIFY_TEXT_WITH_BERT, {**exported, "sentences": sentences, "labels": labels,
                                                 "save_path": str(tmp_path / "imdb_bert")})
    assert got["raw_shape"] == [1, 1]
    encoder = tf.saved_model.load(exported["encoder"])
    # hub.KerasLayer(trainable=True) fine-tunes every variable of the encoder, and fit updated them.
    assert got["encoder_weights"] == len(encoder.trainable_variables) > 30
    assert got["encoder_weights_changed"] == got["encoder_weights"]
    assert np.isfinite(got["loss"]).all()
    original = np.array(got["original"])
    assert original.shape == (5, 1) and original.std() > 0
    np.testing.assert_allclose(got["reloaded"], original, atol=1e-6)
    np.testing.assert_allclose(got["serving"], original, atol=1e-6)


def test_bert_glue(exported, tmp_path, hf_tokenizer, minilm_vocab):
    sentences = sst2_sentences(200)
    long = " ".join(sentences[:10])
    segments = [sentences[0:60] + [long, ""], sentences[60:120] + [long, long], sentences[120:180] + ["x", long]]
    labels = [i % 2 for i in range(len(segments[0]))]
    got = run_tutorial(BERT_GLUE, {**exported, "segments": segments, "labels": labels,
                                   "save_path": str(tmp_path / "glue_bert")})
    # The tutorial's first cells: 'Hello TensorFlow!' in words of pieces, packed twice to 20.
    hello = hf_tokenizer.encode("Hello TensorFlow!", add_special_tokens=False)
    assert got["tok"] == [hf_word_groups(hello)] and len(got["tok"][0]) == 3          # hello / tensor ##flow / !
    n = len(hello.ids)
    assert got["pack20"] == {"input_word_ids": [[101] + hello.ids + [102] + hello.ids + [102] + [0] * (17 - 2 * n)],
                             "input_type_ids": [[0] * (n + 2) + [1] * (n + 1) + [0] * (17 - 2 * n)],
                             "input_mask": [[1] * (2 * n + 3) + [0] * (17 - 2 * n)]}
    pair = hf_tokenizer.encode("some random test sentence", "another sentence")
    assert got["test_preprocess"]["input_word_ids"] == [pair.ids + [0] * (128 - len(pair.ids))]
    assert got["test_preprocess"]["input_type_ids"] == [pair.type_ids + [0] * (128 - len(pair.ids))]

    # Pairs at 64: HF tokenizers' pair encoding wherever nothing is cut; everywhere, what TF Hub's preprocessor
    # computes (TF.Text's BertTokenizer, RoundRobinTrimmer, combine_segments, pad_model_inputs), cuts included.
    tokens = [tf_hub_tokenize(minilm_vocab, s) for s in segments]
    uncut = 0
    for name in ("pairs64", "eager64"):
        for i, e in enumerate(hf_tokenizer.encode_batch(list(zip(segments[0], segments[1])))):
            if len(e.ids) <= 64:
                uncut += 1
                pad = [0] * (64 - len(e.ids))
                assert got[name]["input_word_ids"][i] == e.ids + pad
                assert got[name]["input_type_ids"][i] == e.type_ids + pad
                assert got[name]["input_mask"][i] == e.attention_mask + pad
    assert uncut > 2 * 40
    for name, k, n in (("pairs64", 2, 64), ("eager64", 2, 64), ("pairs32", 2, 32), ("triples32", 3, 32)):
        want = tf_hub_pack(tokens[:k], n)
        for key, value in want.items():
            assert got[name][key] == value.tolist(), (name, key)
    assert max(map(sum, got["triples32"]["input_mask"])) == 32
    assert max(map(max, got["triples32"]["input_type_ids"])) == 2
    # tokenize: words of pieces as HF's word_ids group them.
    assert got["tok_a"] == [hf_word_groups(e) for e in hf_tokenizer.encode_batch(segments[0], add_special_tokens=False)]

    # Fine-tuned through the tf.data pipeline; the export with preprocessing reloads and serves the same.
    assert np.isfinite(got["loss"]).all()
    exported_logits = np.array(got["exported"])
    assert exported_logits.shape == (4, 2)
    np.testing.assert_allclose(got["reloaded"], exported_logits, atol=1e-6)
    np.testing.assert_allclose(got["serving"], exported_logits, atol=1e-6)
