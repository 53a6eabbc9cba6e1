"""The XLA export (`bert-keras export --xla`, savedmodels/xla.py) on TF Serving's execution path: loader.load +
session.run in a process importing only tensorflow and tensorflow_text (session_path.py), where TensorFlow's
Session runs the jit_compile function through XLA:CPU. The reference is the default export of the same model on
the same path. Compilations are counted from XLA's own module dumps (one per compiled shape), not timed."""

import os
import types

import numpy as np
import pytest

from bert_keras.preprocessing import BertPreprocessor
from savedmodels.batching import BatchingParameters
from savedmodels.errors import LoadError
from savedmodels.export import export_for_serving, export_task_model
from savedmodels.xla import XlaShapes, must_compile_functions
from session_path import run_signatures

SHAPES = XlaShapes(lengths=(16, 32, 64), batch_sizes=(1, 2, 4))
LONG = "the film is a charming and often affecting journey " * 4         # 36 pieces: bucket 64
MID = "a charming and often affecting journey through a thin plot ."      # 12 pieces + 2: bucket 16
TEXTS = [MID, "Ünïcödé — “quoted” text", "", LONG, "   \t  "]
IDS = {"input_word_ids": [[101, 2204, 2143, 102, 0]], "input_mask": [[1, 1, 1, 1, 0]],
       "input_type_ids": [[0, 0, 0, 0, 0]]}


@pytest.fixture(scope="module")
def exports(tmp_path_factory, task_models):
    """Each task kind exported twice under one base path: `<kind>` (default) and `<kind>_xla`."""
    models = task_models
    base = tmp_path_factory.mktemp("serving")
    paths = {}
    for name, model in models.items():
        paths[name] = export_task_model(model, str(base), name, keras_file=False)
        if name == "sst2":                   # the one export sequence, as `bert-keras export --xla` runs it
            written = export_for_serving(model, str(base), "sst2_xla", xla=SHAPES)
            paths["sst2_xla"] = written.version
        else:
            paths[f"{name}_xla"] = export_task_model(model, str(base), f"{name}_xla", keras_file=False, xla=SHAPES)
    capped = XlaShapes(SHAPES.lengths, SHAPES.batch_sizes, warmup_max_length=32)
    paths["sst2_capped"] = export_task_model(models["sst2"], str(base), "sst2_capped", keras_file=False, xla=capped)
    return base, paths, models, written


def _calls() -> dict:
    pairs = (TEXTS, TEXTS[::-1])
    questions = ["Who wrote it?", "Où ?", ""]
    contexts = ["It was written by Ann Smith in 1990, in Zürich. " * 6, "Über Paris", LONG]
    return {
        "sst2": {"signature": "serving_default", "inputs": {"text": TEXTS}},
        "sst2/from_ids": {"signature": "from_ids", "inputs": IDS},
        "sst2/classify": {"signature": "classify", "examples": [{"text": s} for s in TEXTS]},
        "mrpc": {"signature": "serving_default", "inputs": {"text_a": pairs[0], "text_b": pairs[1]}},
        "mrpc/classify": {"signature": "classify", "examples": [{"text_a": a, "text_b": b} for a, b in zip(*pairs)]},
        "stsb": {"signature": "serving_default", "inputs": {"text_a": pairs[0], "text_b": pairs[1]}},
        "stsb/regress": {"signature": "regress", "examples": [{"text_a": a, "text_b": b} for a, b in zip(*pairs)]},
        "squad": {"signature": "serving_default", "inputs": {"question": questions, "context": contexts}},
        "swag": {"signature": "serving_default", "inputs": {
            "context": ["A man sits at a piano.", "x", LONG],
            "endings": [["He plays a song.", "He eats the piano."], ["", "y"], [MID, LONG]]}},
        "ner": {"signature": "serving_default", "inputs": {"text": ["Angela Merkel visited Zürich .", "", LONG]}},
    }


def _assert_same(default: dict, xla: dict, where: str) -> None:
    """Every output equal (numbers to 1e-4), except SQuAD's logits at padding positions: -10000 plus the
    padding's own logit, which is 0 in the default export (its blocks skip padding) and arbitrary under XLA
    (encoder.py); there both must stay masked."""
    assert sorted(default) == sorted(xla), where
    for alias, want in default.items():
        want, got = np.asarray(want), np.asarray(xla[alias])
        assert want.shape == got.shape, (where, alias, want.shape, got.shape)
        if alias in ("start_logits", "end_logits"):
            padding = want <= -9000
            assert padding.any() and (got[padding] <= -9000).all() and (got[~padding] > -9000).all(), (where, alias)
            want, got = want[~padding], got[~padding]
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, atol=1e-4, rtol=0, err_msg=f"{where} {alias}")
        else:
            assert got.tolist() == want.tolist(), (where, alias)


def test_every_kind_answers_as_the_default_export_on_the_session_path(exports):
    _, paths, _, _ = exports
    calls = _calls()
    requests = [{"path": paths[key.split("/")[0]], **call} for key, call in calls.items()]
    requests += [{"path": paths[key.split("/")[0] + "_xla"], **call} for key, call in calls.items()]
    got = run_signatures(requests, count_compiles=True)
    default, xla = got[:len(calls)], got[len(calls):]
    for key, want, have in zip(calls, default, xla):
        want.pop("__xla_compiles__"), want.pop("__xla_shapes__")
        shapes = have.pop("__xla_shapes__")
        have.pop("__xla_compiles__")
        _assert_same(want, have, key)
        assert shapes, f"{key}: the XLA export compiled nothing"
        assert all(rows in SHAPES.batch_sizes and length in SHAPES.lengths for rows, length in shapes), shapes
    # The default exports compiled nothing: only the XLA exports' functions are marked.
    assert all(must_compile_functions(paths[k]) == [] for k in calls if "/" not in k)
    assert all(len(must_compile_functions(paths[f"{k}_xla"])) == 1 for k in calls if "/" not in k)


def test_lengths_go_to_the_next_bucket_and_batches_to_the_next_size(exports):
    """A batch of 3 texts packing to 24 positions runs as one [4, 32] call (the next batch size and length
    bucket); the padding row and positions change no answer: each equals the default export's, and a text of
    up to 14 pieces alone compiles [1, 16]."""
    _, paths, _, _ = exports
    third = " ".join(["the"] * 20)                                          # 20 pieces + 2 -> 22 -> 24 -> 32
    batch = {"signature": "serving_default", "inputs": {"text": [MID, third, ""]}}
    alone = {"signature": "serving_default", "inputs": {"text": [MID]}}
    xla = run_signatures([{"path": paths["sst2_xla"], **batch}, {"path": paths["sst2_xla"], **alone}],
                         count_compiles=True)
    default = run_signatures([{"path": paths["sst2"], **batch}, {"path": paths["sst2"], **alone}])
    assert xla[0]["__xla_shapes__"] == [[4, 32]] and xla[0]["__xla_compiles__"] == 1
    assert xla[1]["__xla_shapes__"] == [[1, 16], [4, 32]] and xla[1]["__xla_compiles__"] == 2
    for have, want in zip(xla, default):
        _assert_same(want, {k: v for k, v in have.items() if not k.startswith("__xla")}, "sst2")
    # The padded row did not leak: the first text in a batch of 3 at length 32 answers as alone at length 16.
    np.testing.assert_allclose(xla[0]["logits"][0], xla[1]["logits"][0], atol=1e-4, rtol=0)


def test_no_compile_after_warmup_for_shapes_inside_the_buckets(exports):
    """The warm-up records compile every (length bucket, batch size) once, and nothing else; afterwards requests
    of other lengths and batch sizes, through every signature (they share the compiled function), compile
    nothing: a batch of 3 pads to 4, a batch of 6 runs as two chunks of 4."""
    _, paths, _, _ = exports
    path = paths["sst2_xla"]
    every = sorted([size, length] for length in SHAPES.lengths for size in SHAPES.batch_sizes)
    texts = [MID, LONG, "", "ok", " ".join(["the"] * 25), TEXTS[1]]
    calls = [{"path": path, "warmup": True}]
    calls += [{"path": path, "signature": "serving_default", "inputs": {"text": texts[:n]}} for n in (1, 3, 6, 5)]
    calls += [{"path": path, "signature": "classify", "examples": [{"text": t} for t in texts[:3]]},
              {"path": path, "signature": "from_ids", "inputs": IDS}]
    warmup, *after = run_signatures(calls, count_compiles=True)
    assert warmup["__records__"] >= len(every)
    assert warmup["__xla_shapes__"] == every
    assert warmup["__xla_compiles__"] == len(every)
    for result in after:
        assert result["__xla_compiles__"] == len(every)


def test_a_capped_warmup_compiles_up_to_the_cap_and_longer_buckets_still_answer(exports):
    """warmup_max_length=32: the warm-up compiles the (16 and 32, batch size) shapes only; a text in the 64
    bucket then compiles [1, 64] on its first request and answers as the default export does."""
    _, paths, _, _ = exports
    warmed = sorted([size, length] for length in (16, 32) for size in SHAPES.batch_sizes)
    request = {"signature": "serving_default", "inputs": {"text": [LONG]}}
    warmup, long = run_signatures([{"path": paths["sst2_capped"], "warmup": True},
                                   {"path": paths["sst2_capped"], **request}], count_compiles=True)
    assert warmup["__records__"] == len(warmed) + 1            # + the default export's serving_default record
    assert warmup["__xla_shapes__"] == warmed and warmup["__xla_compiles__"] == len(warmed)
    assert long["__xla_shapes__"] == sorted(warmed + [[1, 64]]) and long["__xla_compiles__"] == len(warmed) + 1
    default = run_signatures([{"path": paths["sst2"], **request}])[0]
    _assert_same(default, {k: v for k, v in long.items() if not k.startswith("__xla")}, "sst2_capped")


def test_the_export_writes_matching_batching_parameters_and_the_serve_command(exports):
    base, _, _, written = exports
    params = BatchingParameters.read(written.batching_parameters)
    assert params.allowed_batch_sizes == SHAPES.batch_sizes and params.max_batch_size == SHAPES.batch_sizes[-1]
    assert written.xla and "--xla_cpu_compilation_enabled=true" in written.serve_command()
    assert os.path.exists(os.path.join(base, "sst2_xla", "model.keras"))


def test_shapes_follow_the_preprocessor(minilm_vocab):
    def model(**kwargs):                             # for_model reads only the task model's preprocessor
        pre = BertPreprocessor(minilm_vocab, **kwargs)
        return types.SimpleNamespace(require_preprocessor=lambda: pre)
    assert XlaShapes.for_model(model(max_seq_length=128)).lengths == (16, 32, 64, 128)
    assert XlaShapes.for_model(model(max_seq_length=100)).lengths == (16, 32, 64, 100)
    assert XlaShapes.for_model(model(max_seq_length=384)).lengths == (16, 32, 64, 128, 384)
    assert XlaShapes.for_model(model(seq_length=48, max_seq_length=128)).lengths == (48,)
    with pytest.raises(ValueError, match="batch sizes"):
        XlaShapes.for_model(model(), batch_sizes=(0, 4))
    shapes = XlaShapes.for_model(model(max_seq_length=512), warmup_max_length=128)
    assert shapes.lengths == (16, 32, 64, 128, 512) and shapes.warmup_lengths == (16, 32, 64, 128)
    assert XlaShapes.for_model(model(max_seq_length=512)).warmup_lengths == (16, 32, 64, 128, 512)
    assert XlaShapes.for_model(model(max_seq_length=512), warmup_max_length=100).warmup_lengths == (16, 32, 64)
    with pytest.raises(ValueError, match="below the first length bucket 16"):
        XlaShapes.for_model(model(), warmup_max_length=8)


def test_the_local_server_refuses_an_xla_export_without_the_flag(exports):
    from savedmodels.local_server import start_server
    from savedmodels.session_bundle import SessionBundle
    base, paths, _, _ = exports
    with pytest.raises(LoadError, match="--xla_cpu_compilation_enabled") as refused:
        SessionBundle(paths["sst2_xla"])
    assert "XLA compilation disabled" in str(refused.value) and "without --xla" in str(refused.value)
    with pytest.raises(RuntimeError, match="--xla_cpu_compilation_enabled=true"):
        start_server({"sst2_xla": str(base / "sst2_xla")})
    SessionBundle(paths["sst2"]).close()                                    # a default export needs no flag
    bundle = SessionBundle(paths["sst2_xla"], xla_cpu_compilation_enabled=True)
    try:
        assert bundle.warmup() == len(SHAPES.lengths) * len(SHAPES.batch_sizes) + 1
        logits = bundle.run("serving_default", {"text": ["a charming journey", ""]})["logits"]
        assert logits.shape == (2, 2) and np.isfinite(logits).all()
    finally:
        bundle.close()
