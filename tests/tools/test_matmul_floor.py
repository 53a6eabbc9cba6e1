"""benchmarks/matmul_floor.py models the dense matmuls a real classifier export executes: a traced Session.run of a tiny
export (on the session path TF Serving takes) and one of the floor, for the same sentences, run matmuls of the same
output shapes, as many of each."""

import collections
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.config import PRESETS
from bert_keras.encoder import BertEncoder
from bert_keras.preprocessing import BertPreprocessor
from bert_keras.tasks import BertClassifier
from savedmodels.export import export_task_model
from savedmodels.session_bundle import SessionBundle

from matmul_floor import MatmulFloor  # noqa: E402
from profile_serving import op_type  # noqa: E402

TEXTS = ["a charming and often affecting journey .", "bad", "Ünïcödé — “quoted” text, and then some more words"]


def _dense_matmul_shapes(step_stats) -> collections.Counter:
    """(rows, columns) of every executed dense matmul (not the attention's batched ones), leading dims flattened."""
    shapes = collections.Counter()
    for device in step_stats.dev_stats:
        for node in device.node_stats:
            op = op_type(node.timeline_label, node.node_name)
            if "MatMul" in op and "BatchMatMul" not in op:
                dims = [d.size for d in node.output[0].tensor_description.shape.dim]
                shapes[(int(np.prod(dims[:-1])), dims[-1])] += 1
    return shapes


def _traced(run):
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    metadata = tf.compat.v1.RunMetadata()
    run(options, metadata)
    return _dense_matmul_shapes(metadata.step_stats)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, minilm_vocab):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=32)
    model = BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 3, preprocessor=pre)
    return model, export_task_model(model, str(tmp_path_factory.mktemp("floor")), "sst2", keras_file=False)


def test_the_floor_runs_the_exports_dense_matmuls(classifier):
    model, export = classifier
    bundle = SessionBundle(export)
    signature = bundle.signature_defs["serving_default"]
    feeds = {signature.inputs["text"].name: np.array(TEXTS, object)}
    fetch = signature.outputs["probabilities"].name
    exported = _traced(lambda o, m: bundle.session.run(fetch, feeds, options=o, run_metadata=m))
    counts = model.preprocessor(TEXTS)["input_mask"].numpy().sum(axis=1)
    assert len(set(counts)) == 3                          # rows of real tokens and of [CLS] are told apart
    floor = MatmulFloor(model.encoder.config, num_classes=3)
    assert floor.run(counts).shape == (3, 3)
    assert _traced(lambda o, m: floor.run(counts, o, m)) == exported
    assert sum(exported.values()) == 6 * 2 + 2            # two layers of six, pooler, head
