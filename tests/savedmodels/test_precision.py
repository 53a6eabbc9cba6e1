"""bf16 and int8 exports: the same raw-text signatures, the stock server's ops (the export's op check), the
SavedModelBundle path, answers equal to the reduced-precision Keras model and close to fp32; a CPU without the
instructions gets a warning naming them."""

import keras
import numpy as np
import pytest

from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.tasks import BertClassifier
from savedmodels import precision
from savedmodels.export import export_task_model
from session_path import run_signatures

TEXTS = ["a charming and often affecting journey .", "the plot is thin", "Ünïcödé — “quoted”", "", "ok"]


@pytest.fixture(scope="module")
def model(minilm_vocab):
    keras.utils.set_random_seed(0)
    return BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 2, label_names=["neg", "pos"],
                          preprocessor=BertPreprocessor(minilm_vocab, max_seq_length=64))


# bf16: the graph the server runs may fuse and order bfloat16 ops differently from eager Keras (bfloat16 keeps 8
# bits of mantissa: 2e-3 on logits of ~0.1); int8: the same integer arithmetic. The serving CPU's flags change only
# the warning, so each case builds its model for a CPU that warns: bf16 without its instructions; int8 always, as
# it serves slower than fp32 on TensorFlow's CPU kernels with or without VNNI (measured).
@pytest.mark.parametrize("kind,dtype,atol,flags,warning", [
    pytest.param("bf16", "bfloat16", 2e-3, {"avx2"}, "none of avx512_bf16, amx_bf16.*slower than fp32", id="bf16"),
    pytest.param("int8", "int8", 1e-5, {"avx2", "avx512_vnni"},
                 "int8 export .* serves slower than fp32, with or without VNNI", id="int8")])
def test_reduced_precision_export_runs_on_the_session_path(model, tmp_path, kind, dtype, atol, flags, warning):
    with pytest.warns(UserWarning, match=warning):
        reduced = precision.with_precision(model, kind, serving_cpu_flags=flags)
    assert dtype in {w.dtype for w in reduced.encoder.weights}                  # really stored that way
    path = export_task_model(reduced, str(tmp_path), kind, keras_file=False)   # includes the op check
    got = run_signatures([{"path": path, "signature": "serving_default", "inputs": {"text": TEXTS}}])[0]
    want = reduced.predict(TEXTS, verbose=0)
    np.testing.assert_allclose(got["logits"], want, atol=atol, rtol=0)
    fp32 = model.predict(TEXTS, verbose=0)
    np.testing.assert_allclose(want, fp32, atol=0.05)                          # a tiny model: small logits
    assert want.argmax(-1).tolist() == fp32.argmax(-1).tolist()


def test_native_instructions_and_unknown_precision(model):
    assert precision.cpu_support("bf16", {"avx2"}) == (False, "none of avx512_bf16, amx_bf16")
    assert precision.cpu_support("bf16", {"avx2", "amx_bf16"})[0]
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, int8"):
        precision.with_precision(model, "fp16")
    assert precision.with_precision(model, "fp32") is model
