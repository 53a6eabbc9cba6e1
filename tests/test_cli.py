import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_keras
from bert_keras import load_checkpoint
from bert_keras_cli.main import main
from conftest import REPO


def test_convert_writes_a_keras_file_and_a_tf1_checkpoint(minilm_dir, tmp_path):
    out, tf1 = tmp_path / "minilm.keras", tmp_path / "tf1"
    assert main(["convert", "--checkpoint", minilm_dir, "--out", str(out), "--google-out", str(tf1)]) == 0
    _, reference = load_checkpoint(minilm_dir)
    x = {"input_word_ids": np.array([[101, 7592, 2088, 102]], "int32"), "input_mask": np.ones((1, 4), "int32"),
         "input_type_ids": np.zeros((1, 4), "int32")}
    want = np.asarray(reference(x)["sequence_output"])
    np.testing.assert_array_equal(keras.models.load_model(out)(x)["sequence_output"], want)
    np.testing.assert_array_equal(load_checkpoint(str(tf1))[1](x)["sequence_output"], want)
    assert (tf1 / "vocab.txt").read_bytes() == (Path(minilm_dir) / "vocab.txt").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["minilm.keras", "tf1"]  # no partial files left


def test_convert_errors_exit_2_with_the_reason(tmp_path, capsys):
    assert main(["convert", "--checkpoint", str(tmp_path), "--out", str(tmp_path / "m.keras")]) == 2
    assert "bert_model.ckpt.index" in capsys.readouterr().err
    assert main(["convert", "--checkpoint", str(tmp_path)]) == 2
    assert "Nothing to write" in capsys.readouterr().err


def test_export_refuses_a_warmup_cap_without_xla(tmp_path, capsys):
    argv = ["export", "--model", str(tmp_path), "--base-path", str(tmp_path), "--name", "m"]
    assert main(argv + ["--xla-warmup-max-length", "64"]) == 2
    assert "add --xla" in capsys.readouterr().err


def test_version_is_one_line_read_without_importing_tensorflow():
    """`bert-keras --version`: the versions the packages themselves report, on one line, in a process that never
    imports TensorFlow (its import alone takes seconds)."""
    script = ("import sys\nfrom bert_keras_cli.main import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n"
              "    pass\nprint('tensorflow' in sys.modules, 'keras' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.stdout.splitlines() == [f"bert-keras {bert_keras.__version__} (TensorFlow {tf.__version__}, Keras "
                                       f"{keras.__version__})", "False False"], run.stderr


def test_export_offers_and_checks_each_formats_precisions(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "SavedModel: fp32, bf16, int8" in help_text and "--format litert: fp32, fp16, int8" in help_text
    argv = ["export", "--model", str(tmp_path / "missing.keras"), "--precision"]
    assert main([*argv, "fp16", "--base-path", str(tmp_path), "--name", "m"]) == 2
    assert "a SavedModel takes --precision fp32, bf16, int8, not fp16" in capsys.readouterr().err
    assert main([*argv, "bf16", "--format", "litert", "--out", str(tmp_path / "m.tflite")]) == 2
    assert "--format litert takes --precision fp32, fp16, int8, not bf16" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("command,says,not_says", [("pretrain", "the records' own", "SQuAD"),
                                                   ("finetune", "384 for SQuAD", "records")])
def test_training_flags_help_speaks_of_its_own_command(command, says, not_says, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    length_help = text[text.index("--max-seq-length MAX_SEQ_LENGTH longest"):][:160]
    assert says in length_help and not_says not in length_help


def test_presets_lists_parameter_counts(capsys):
    assert main(["presets"]) == 0
    assert "109,482,240" in capsys.readouterr().out


def test_demo_never_overwrites_a_run(minilm_dir, tmp_path, capsys):
    (tmp_path / "old.txt").write_text("a previous run")
    assert main(["demo", "--out", str(tmp_path)]) == 2
    assert "is not empty" in capsys.readouterr().err and sorted(p.name for p in tmp_path.iterdir()) == ["old.txt"]


def test_embed_finds_the_paraphrase(minilm_dir, capsys):
    # all-MiniLM-L6-v2 is trained for this: each sentence's nearest neighbour is its paraphrase.
    assert main(["embed", "The cat sits outside.", "A man is playing guitar.", "A kitten is sitting outdoors.",
                 "Someone strums a guitar on stage."]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "->" in line]
    assert "The cat sits outside." in lines[0] and "A kitten is sitting outdoors." in lines[0].split("->")[1]
    assert "Someone strums a guitar" in lines[1].split("->")[1]


@pytest.mark.integration
def test_export_xla_answers_on_the_serving_path_as_the_default_export(minilm_vocab, tmp_path, capsys):
    """`bert-keras export --xla` next to the plain `bert-keras export` of the same model.keras: on TF Serving's
    path (TF1 loader + Session.run, session_path.py) with XLA:CPU on, serving_default and classify answer as the
    default export's (1e-4), the ids went through XLA compilations of bucketed shapes only, and the printed
    serve command carries the server flag (the default one's does not)."""
    from bert_keras.config import PRESETS
    from bert_keras.encoder import BertEncoder
    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.tasks import BertClassifier
    from savedmodels.batching import BatchingParameters
    from savedmodels.xla import must_compile_functions
    from session_path import run_signatures
    keras.utils.set_random_seed(3)
    pre = BertPreprocessor(minilm_vocab, max_seq_length=32)          # buckets 16 and 32: few warm-up records
    model = BertClassifier(BertEncoder(PRESETS["bert_tiny"]), 2, label_names=["neg", "pos"], preprocessor=pre)
    keras_file = str(tmp_path / "model.keras")
    model.save(keras_file)
    printed = {}
    for name, flags in (("plain", []), ("fast", ["--xla"])):         # one base path each, as a user would
        base = str(tmp_path / f"serving_{name}")
        assert main(["export", "--model", keras_file, "--base-path", base, "--name", "sst2", *flags]) == 0
        printed[name] = capsys.readouterr().out
    serve = {name: [line for line in out.splitlines() if line.startswith("serve: ")] for name, out in printed.items()}
    assert len(serve["fast"]) == 1 and "--xla_cpu_compilation_enabled=true" in serve["fast"][0]
    assert len(serve["plain"]) == 1 and "--xla_cpu_compilation_enabled" not in serve["plain"][0]
    batching = BatchingParameters.read(str(tmp_path / "serving_fast" / "batching_parameters.txt"))
    assert batching.allowed_batch_sizes == (1, 2, 4, 8, 16, 32)
    plain, fast = tmp_path / "serving_plain" / "sst2" / "1", tmp_path / "serving_fast" / "sst2" / "1"
    assert must_compile_functions(str(plain)) == [] and len(must_compile_functions(str(fast))) == 1
    texts = ["a charming and often affecting journey", "Ünïcödé — “quoted” text", "",
             " ".join(["the"] * 20) + " plot ."]                           # 23 pieces + 2: bucket 32
    calls = [{"signature": "serving_default", "inputs": {"text": texts}},
             {"signature": "serving_default", "inputs": {"text": texts[:1]}},
             {"signature": "classify", "examples": [{"text": t} for t in texts[:3]]}]
    want = run_signatures([{"path": str(plain), **call} for call in calls])
    got = run_signatures([{"path": str(fast), **call} for call in calls], count_compiles=True)
    for call, w, g in zip(calls, want, got):
        assert g.pop("__xla_compiles__") >= 1
        assert set(map(tuple, g.pop("__xla_shapes__"))) <= {(rows, length) for rows in (1, 2, 4, 8, 16, 32)
                                                            for length in (16, 32)}
        assert sorted(w) == sorted(g), call["signature"]
        for alias, value in w.items():
            if isinstance(value, list) and value and isinstance(np.asarray(value).flat[0], (float, np.floating)):
                np.testing.assert_allclose(g[alias], value, atol=1e-4, rtol=0, err_msg=alias)
            else:
                assert g[alias] == value, alias
