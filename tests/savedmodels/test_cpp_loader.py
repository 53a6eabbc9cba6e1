"""The exports under TensorFlow's C++ `LoadSavedModel` + `Session::Run`, the code tensorflow_model_server runs:
tools/saved_model_session_run.cc compiled against the tensorflow wheel's headers and libtensorflow_cc, with
TF.Text's kernels loaded from their .so files. Reference: the Keras models in this process, same text."""

import os
import shutil
import subprocess

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.config import PRESETS
from bert_keras.encoder import BertEncoder
from bert_keras.preprocessing import BertPreprocessor
from bert_keras.tasks import BertClassifier, BertSpanLabeler, BertTagger
from conftest import REPO
from savedmodels.export import export_task_model

pytestmark = pytest.mark.slow
TAGS = ["O", "B-PER", "I-PER"]
# The program feeds [batch] string inputs: every raw-text signature but multiple choice's endings [batch, N]
# (whose session path test_export.py covers).


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler (apt-get install g++)")
    lib = os.path.dirname(tf.__file__)
    out = str(tmp_path_factory.mktemp("cpp") / "saved_model_session_run")
    command = ["g++", "-O1", "-w", *tf.sysconfig.get_compile_flags(), str(REPO / "tools" / "saved_model_session_run.cc"),
               "-o", out, "-Wl,--no-as-needed", f"-L{lib}", "-l:libtensorflow_cc.so.2",
               "-l:libtensorflow_framework.so.2", f"-Wl,-rpath,{lib}"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def _run(program, export, signature, **inputs) -> dict:
    import tensorflow_text
    ops = os.path.join(os.path.dirname(tensorflow_text.__file__), "python", "ops")
    args = [f"{k}={v}" for k, values in inputs.items() for v in values]
    result = subprocess.run([program, export, signature, ops, *args], capture_output=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    outputs = {}
    for line in result.stdout.decode().splitlines():
        head, _, values = line.partition(" : ")
        alias, dtype, *shape = head.split()
        items = values.split()
        if dtype == "string":
            array = np.array([b"" if v == "-" else bytes.fromhex(v) for v in items], object)
        else:
            array = np.array(items, float if dtype == "float" else int)
        outputs[alias] = array.reshape([int(d) for d in shape])
    return outputs


def test_cpp_load_saved_model_and_session_run_equal_keras(program, minilm_vocab, tmp_path):
    keras.utils.set_random_seed(3)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=64)
    encoder = lambda: BertEncoder(PRESETS["bert_tiny"])  # noqa: E731
    sst2 = BertClassifier(encoder(), 2, label_names=["neg", "pos"], preprocessor=pre)
    mrpc = BertClassifier(encoder(), 2, preprocessor=pre, segments=2)
    squad = BertSpanLabeler(encoder(), pre, doc_stride=16, max_query_length=8)
    ner = BertTagger(encoder(), len(TAGS), label_names=TAGS, preprocessor=pre)
    path = lambda model, name: export_task_model(model, str(tmp_path), name, keras_file=False)  # noqa: E731
    texts = ["a charming and often affecting journey .", "Ünïcödé — “quoted”", ""]

    out = _run(program, path(sst2, "sst2"), "serving_default", text=texts)
    np.testing.assert_allclose(out["logits"], sst2(pre(texts)), atol=1e-5, rtol=0)
    assert [x.decode() for x in out["label"]] == [["neg", "pos"][i] for i in sst2(pre(texts)).numpy().argmax(-1)]

    out = _run(program, path(mrpc, "mrpc"), "serving_default", text_a=texts, text_b=texts[::-1])
    np.testing.assert_allclose(out["logits"], mrpc(pre((tf.constant(texts), tf.constant(texts[::-1])))), atol=1e-5)

    questions, contexts = ["Who wrote it?"], ["It was written by Ann Smith in 1990, in Zürich. " * 4]
    out = _run(program, path(squad, "squad"), "serving_default",
               question=questions, context=contexts)
    want = squad.answer_tensors(tf.constant(questions), tf.constant(contexts))
    assert out["answer"].tolist() == want["answer"].numpy().tolist()
    np.testing.assert_allclose(out["start_logits"], want["start_logits"], atol=1e-5)

    out = _run(program, path(ner, "ner"), "serving_default", text=["Angela Merkel visited Paris ."])
    logits = ner(pre(["Angela Merkel visited Paris ."])).numpy()
    n = int(out["token_mask"].sum())
    assert [x.decode() for x in out["labels"][0, :n]] == [TAGS[i] for i in logits[0, 1:n + 1].argmax(-1)]
