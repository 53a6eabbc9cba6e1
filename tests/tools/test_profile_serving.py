"""benchmarks/profile_serving.py on a real export of a tiny classifier, loaded on the session path: every executed
node is attributed to an op type and a stage (tokenizer, embeddings, each layer, head), and the A/B timing
runs both exports."""

import os
import sys

import keras
import pytest

from bert_keras.config import PRESETS
from bert_keras.encoder import BertEncoder
from bert_keras.preprocessing import BertPreprocessor
from bert_keras.tasks import BertClassifier
from savedmodels.export import export_task_model
from savedmodels.session_bundle import SessionBundle

import profile_serving  # noqa: E402

TEXTS = ["a charming and often affecting journey .", "Ünïcödé — “quoted” text"]


@pytest.fixture(scope="module")
def export(tmp_path_factory, minilm_vocab):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=32)
    model = BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 2, preprocessor=pre)
    return export_task_model(model, str(tmp_path_factory.mktemp("profile")), "sst2", keras_file=False)


def test_every_node_lands_in_a_stage_and_an_op_type(export):
    found = profile_serving.profile(SessionBundle(export), TEXTS, runs=2)
    stages = {row["name"]: row for row in found["by_stage"]}
    assert {"layer 0", "layer 1", "embeddings", "pooler + head", "text + other"} <= set(stages)
    assert "layer 2" not in stages                                        # bert_tiny has two layers
    types = {row["name"] for row in found["by_op_type"]}
    assert "FastWordpieceTokenizeWithOffsets" in types                    # the tokenizer ran in the same run
    assert any("MatMul" in t for t in types)
    for table in ("by_stage", "by_op_type"):                              # the two views count the same nodes
        assert sum(row["nodes"] for row in found[table]) == pytest.approx(found["nodes_per_run"], abs=len(found[table]))
        assert sum(row["micros"] for row in found[table]) == pytest.approx(found["node_micros_per_run"], rel=1e-6)


def test_stage_names_from_node_paths():
    assert profile_serving.stage_of("StatefulPartitionedCall/m/bert_encoder_1/transformer_layer_11_1/query/MatMul") \
        == "layer 11"
    assert profile_serving.stage_of("x/bert_encoder/embeddings_1/add") == "embeddings"
    assert profile_serving.stage_of("x/bert_classifier/logits_1/BiasAdd") == "pooler + head"
    assert profile_serving.stage_of("x/RegexFullMatch") == "text + other"
    assert profile_serving.op_type("a/b = _MklNativeFusedMatMul(x, y)", "a/b") == "_MklNativeFusedMatMul"


def test_compare_times_both_exports(export):
    bundle = SessionBundle(export)
    speed = profile_serving.compare({"export": bundle, "compare": SessionBundle(export)}, TEXTS * 4, batch=2,
                                    rounds=1, seconds=0.2)
    assert set(speed) == {"export", "compare"} and min(speed.values()) > 0
    with pytest.raises(ValueError, match="make no batch of 32"):
        profile_serving.compare({"export": bundle}, TEXTS, batch=32, rounds=1, seconds=0.1)
