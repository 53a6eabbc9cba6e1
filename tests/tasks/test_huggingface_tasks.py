"""Hugging Face task folders without torch: the names and config.json entries transformers reads (written out
here from transformers' own module paths), the round trip, labels and problem_type, the multi-label
classifier, and which head `finetune --model <task folder>` starts from. The comparison with transformers itself
is test_huggingface_tasks_torch.py's."""

import json
import os
import warnings

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file

from bert_keras import BertConfig, BertEncoder, BertPreprocessor
from bert_keras.tasks import (BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTagger, from_huggingface,
                              load_task_model, save_huggingface)
from bert_keras_cli.main import main

CONFIG = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)
TAGS = ["O", "B-PER", "I-PER"]
# transformers' module paths: BertForSequenceClassification.classifier, BertForQuestionAnswering.qa_outputs, ...
HEAD = {"single": "classifier", "multi": "classifier", "regression": "classifier", "tagger": "classifier",
        "span": "qa_outputs", "choice": "classifier"}
ARCHITECTURE = {"single": "BertForSequenceClassification", "multi": "BertForSequenceClassification",
                "regression": "BertForSequenceClassification", "tagger": "BertForTokenClassification",
                "span": "BertForQuestionAnswering", "choice": "BertForMultipleChoice"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory, minilm_vocab):
    """One tiny model of each kind, written by save_huggingface."""
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=32)
    models = {"single": BertClassifier(BertEncoder(CONFIG), 2, label_names=["1", "0"], preprocessor=pre),
              "multi": BertClassifier(BertEncoder(CONFIG), 3, label_names=["a", "b", "c"], preprocessor=pre,
                                      multi_label=True),
              "regression": BertClassifier(BertEncoder(CONFIG), 1, preprocessor=pre),
              "tagger": BertTagger(BertEncoder(CONFIG), label_names=TAGS, preprocessor=pre),
              "span": BertSpanLabeler(BertEncoder(CONFIG), pre),
              "choice": BertMultipleChoice(BertEncoder(CONFIG), preprocessor=pre)}
    root = tmp_path_factory.mktemp("hf")
    return {name: save_huggingface(model, str(root / name)) for name, model in models.items()}, models


@pytest.mark.parametrize("name", list(HEAD))
def test_the_folder_holds_transformers_names_and_config(folders, name):
    paths, models = folders
    tensors = load_file(os.path.join(paths[name], "model.safetensors"))
    head = HEAD[name]
    outputs = {"single": 2, "multi": 3, "regression": 1, "tagger": 3, "span": 2, "choice": 1}[name]
    assert {k for k in tensors if not k.startswith("bert.")} == {f"{head}.weight", f"{head}.bias"}
    assert tensors[f"{head}.weight"].shape == (outputs, 32) and tensors[f"{head}.bias"].shape == (outputs,)
    kernel = models[name].get_layer({"span": "span_logits", "choice": "choice_score"}.get(name, "logits")).kernel
    np.testing.assert_array_equal(tensors[f"{head}.weight"], np.asarray(kernel).T)          # torch's [out, in]
    pooler = {"bert.pooler.dense.weight", "bert.pooler.dense.bias"} <= set(tensors)
    assert pooler == (name not in ("tagger", "span"))            # add_pooling_layer=False in transformers
    assert "bert.encoder.layer.1.attention.self.query.weight" in tensors
    config = json.load(open(os.path.join(paths[name], "config.json")))
    assert config["architectures"] == [ARCHITECTURE[name]] and config["model_type"] == "bert"
    assert config.get("problem_type") == {"single": "single_label_classification",
                                          "multi": "multi_label_classification", "regression": "regression"}.get(name)
    labels = {"single": ["1", "0"], "multi": ["a", "b", "c"], "tagger": TAGS}.get(name)
    if labels:
        assert config["id2label"] == {str(i): n for i, n in enumerate(labels)}
        assert config["label2id"] == {n: i for i, n in enumerate(labels)}
    assert sorted(os.listdir(paths[name])) == ["config.json", "model.safetensors", "tokenizer.json",
                                               "tokenizer_config.json", "vocab.txt"]
    assert json.load(open(os.path.join(paths[name], "tokenizer_config.json")))["do_lower_case"] is True


@pytest.mark.parametrize("name", list(HEAD))
def test_a_folder_opens_as_the_task_model_with_its_weights(folders, name):
    paths, models = folders
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = load_task_model(paths[name])
    assert not [w for w in caught if "pooler" in str(w.message)]     # token and span folders have none: quietly
    original = models[name]
    assert type(loaded) is type(original)
    for attribute in ("label_names", "multi_label", "regression"):
        assert getattr(loaded, attribute, None) == getattr(original, attribute, None)
    pooler = {id(v) for v in loaded.encoder.pooler.weights}
    kept = [(a, b) for a, b, v in zip(loaded.get_weights(), original.get_weights(), loaded.weights)
            if id(v) not in pooler or name not in ("tagger", "span")]
    assert kept and all(np.array_equal(a, b) for a, b in kept)
    assert loaded.preprocessor.vocab == original.preprocessor.vocab and loaded.preprocessor.lower_case


def test_the_encoder_of_a_task_folder_loads_alone(folders):
    from bert_keras.loading import load_backbone
    paths, models = folders
    encoder, _ = load_backbone(paths["single"])       # the head is left out, not an unknown weight
    for a, b in zip(encoder.get_weights(), models["single"].encoder.get_weights()):
        np.testing.assert_array_equal(a, b)


def with_default_labels(folder, to):
    """A copy of a classifier folder whose config.json says what transformers 5 writes for default labels."""
    os.makedirs(to)
    for f in ("model.safetensors", "vocab.txt"):
        os.symlink(os.path.join(folder, f), os.path.join(to, f))
    config = json.load(open(os.path.join(folder, "config.json")))
    for key in ("id2label", "label2id", "problem_type", "num_labels"):      # transformers 5 leaves defaults out
        config.pop(key)
    with open(os.path.join(to, "config.json"), "w") as f:
        json.dump(config, f)
    return str(to)


def test_transformers_default_labels_and_problem_types(folders, tmp_path):
    from bert_keras.checkpoints.huggingface_tasks import read_task_head
    paths, _ = folders
    for name in ("single", "regression"):
        folder = tmp_path / name
        config = json.load(open(with_default_labels(paths[name], folder) + "/config.json"))
        head = read_task_head(str(folder))
        assert head.label_names == (["LABEL_0", "LABEL_1"] if name == "single" else ["LABEL_0"])
        assert head.problem_type == ("single_label_classification" if name == "single" else "regression")
    config["problem_type"] = "ranking"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="problem_type 'ranking'"):
        read_task_head(str(folder))


def test_multi_label_classifier(folders, tmp_path):
    _, models = folders
    model = models["multi"]
    model.save(tmp_path / "multi.keras")
    loaded = keras.models.load_model(tmp_path / "multi.keras")
    assert loaded.multi_label and loaded.get_config()["multi_label"] is True
    logits = np.array([[2.0, -1.0, 0.3], [-0.2, 0.0, -3.0]], "float32")
    out = {k: np.asarray(v) for k, v in loaded.decode(logits).items()}
    probabilities = 1 / (1 + np.exp(-logits))
    np.testing.assert_allclose(out["probabilities"], probabilities, rtol=1e-6)
    assert out["selected"].tolist() == [[True, False, True], [False, False, False]]
    assert out["labels"].astype(str).tolist() == [["a", "", "c"], ["", "", ""]]
    result = loaded.classify(["a fine film"])[0]
    assert sorted(result) == ["labels", "probabilities"]
    assert result["labels"] == [n for n, p in result["probabilities"].items() if p > 0.5]
    loaded.compile(optimizer="adam", loss=keras.losses.BinaryCrossentropy(from_logits=True))
    history = loaded.fit(["a fine film", "dull"], np.array([[1, 0, 1], [0, 1, 0]], "float32"), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    with pytest.raises(ValueError, match="multi_label needs two classes"):
        BertClassifier(model.encoder, 1, multi_label=True)


def test_finetune_starts_from_the_folders_head_when_it_fits(folders, tmp_path):
    from bert_keras.finetune.classification import ClassificationTask
    from bert_keras.finetune.source_head import start_from_source_head
    paths, models = folders
    task = ClassificationTask("sst-2")
    task.label_names = ["0", "1"]                                   # what read_glue gives for SST-2
    model = task.build_model(BertEncoder(CONFIG), models["single"].preprocessor, [])
    note = start_from_source_head(model, paths["single"])
    assert note.startswith("continuing the BertForSequenceClassification head") and "labels 0, 1" in note
    kernel, bias = (np.asarray(v) for v in models["single"].get_layer("logits").weights)
    np.testing.assert_array_equal(np.asarray(model.get_layer("logits").kernel), kernel[:, ::-1])  # ["1", "0"]
    np.testing.assert_array_equal(np.asarray(model.get_layer("logits").bias), bias[::-1])
    before = [np.asarray(v) for v in model.get_layer("logits").weights]
    default_labels = with_default_labels(paths["single"], tmp_path / "default_labels")
    for source, why in ((paths["span"], "it is a BertForQuestionAnswering"),
                        (default_labels, "its labels (LABEL_0, LABEL_1) are not the data's (0, 1); to continue its "
                                         "head, set id2label in its config.json to the data's names"),
                        (paths["multi"], "its head is multi-label"),
                        (paths["regression"], "its head is regression (one score), the data's classification")):
        note = start_from_source_head(model, source)
        assert note.startswith(f"{source}: training a new BertClassifier head") and why in note, note
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(before, model.get_layer("logits").weights))
    assert start_from_source_head(model, "bert_tiny") is None
    stsb = ClassificationTask("sts-b")
    regression = stsb.build_model(BertEncoder(CONFIG), models["single"].preprocessor, [])
    assert start_from_source_head(regression, paths["regression"]).startswith("continuing")


def test_convert_between_task_folders_and_keras_files(folders, tmp_path, capsys):
    paths, models = folders
    assert main(["convert", "--checkpoint", paths["tagger"], "--out", str(tmp_path / "tagger.keras")]) == 0
    tagger = load_task_model(str(tmp_path / "tagger.keras"))
    assert isinstance(tagger, BertTagger) and tagger.label_names == TAGS
    assert main(["convert", "--checkpoint", str(tmp_path / "tagger.keras"), "--hf-out", str(tmp_path / "back")]) == 0
    assert "BertForTokenClassification" in capsys.readouterr().out
    again = load_file(str(tmp_path / "back" / "model.safetensors"))
    first = load_file(os.path.join(paths["tagger"], "model.safetensors"))
    assert sorted(again) == sorted(first) and all(np.array_equal(again[k], first[k]) for k in first)
    assert main(["convert", "--checkpoint", str(tmp_path / "tagger.keras"), "--google-out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--google-out writes encoder checkpoints" in err[0]
    assert not (tmp_path / "g").exists()


@pytest.mark.integration
def test_finetune_continues_a_transformers_classifier(folders, tmp_path, capsys):
    paths, _ = folders
    tsv = tmp_path / "train.tsv"
    rows = [("a fine film", 1), ("dull and long", 0), ("gorgeous", 1), ("a mess", 0)] * 2
    tsv.write_text("sentence\tlabel\n" + "".join(f"{s}\t{label}\n" for s, label in rows), encoding="utf-8")
    code = main(["finetune", "--quiet", "--task", "sst-2", "--model", paths["single"], "--train", str(tsv),
                 "--out", str(tmp_path / "run"), "--epochs", "1", "--batch-size", "4", "--max-seq-length", "32"])
    out = capsys.readouterr().out
    assert code == 0 and f"continuing the BertForSequenceClassification head of {paths['single']}" in out
    assert load_task_model(str(tmp_path / "run")).label_names == ["0", "1"]
