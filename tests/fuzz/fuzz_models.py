"""Mutated model folders and files, each given to every command that takes a model.

The sources (fuzz_inputs): a Hugging Face folder, a google-research checkpoint, a .keras encoder, a .keras task
model and a TF Serving export, all bert_tiny. The mutations: another architecture (config.json model_type roberta
with RobertaForSequenceClassification, gpt2 with GPT2LMHeadModel, or architectures only), missing or truncated
files (weights, config, vocabulary), a config that is not JSON, an inconsistent config (hidden_size not divisible
by the heads, vocab_size that is not the vocabulary's line count, hidden_size or layers that are not the
weights', a number written as a string, zero positions), garbage weights; for an export, an empty or garbage
version folder.

    cases = model_cases(variants=2)
"""

from __future__ import annotations

import json
import random
import shutil

from fuzz_cases import Case

# command id: (argv with {F} the model, heavy, the sources it takes)
COMMANDS = {
    "finetune-model": (("finetune", "--task", "sst-2", "--model", "{F}", "--train", "{sst2.tsv}", "--out", "{out}",
                        "--epochs", "1", "--batch-size", "2", "--max-seq-length", "16", "--max-train-examples", "4",
                        "--quiet"), True, ("hf", "google", "keras")),
    "convert": (("convert", "--checkpoint", "{F}", "--out", "{out}.keras"), False, ("hf", "google", "keras", "task")),
    "fill-mask": (("fill-mask", "--model", "{F}", "a [MASK] b"), False, ("hf", "google", "keras")),
    "features": (("features", "{corpus.txt}", "--model", "{F}", "--out", "{out}.npz", "--max-seq-length", "16"),
                 False, ("hf", "google", "keras")),
    "attention": (("attention", "a text", "--model", "{F}", "--npz", "{out}.npz"), False, ("hf", "google", "keras")),
    "export-hub": (("export-hub", "--model", "{F}", "--out", "{out}", "--seq-length", "16"), True,
                   ("hf", "google", "keras")),
    "pretrain-model": (("pretrain", "--model", "{F}", "--text", "{corpus.txt}", "--train-steps", "2", "--save-every",
                        "2", "--batch-size", "2", "--max-seq-length", "16", "--out", "{out}", "--quiet"), True,
                       ("hf", "google", "keras")),
    "zoo-get": (("zoo", "get", "{F}", "--quiet"), False, ("google", "hf")),
    "export": (("export", "--model", "{F}", "--base-path", "{out}", "--name", "m"), True, ("task", "hf", "keras")),
    "serve": (("serve", "{F}"), False, ("export",)),
}
SOURCES = {"hf": "hf_tiny", "google": "google_tiny", "keras": "tiny.keras", "task": "task.keras", "export": "export"}


def _json_edit(name, change):
    def mutate(folder, rng):
        path = folder / name
        config = json.loads(path.read_text())
        change(config)
        path.write_text(json.dumps(config))
    return mutate


def _remove(*names):
    def mutate(folder, rng):
        for name in names:
            for path in folder.glob(name):
                path.unlink()
    return mutate


def _cut(pattern):
    def mutate(folder, rng):
        [path] = list(folder.glob(pattern))[:1] or [None]
        data = path.read_bytes()
        path.write_bytes(data[:rng.randrange(1, len(data))])
    return mutate


def _garbage(pattern):
    def mutate(folder, rng):
        for path in list(folder.glob(pattern))[:1]:
            path.write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
    return mutate


def _vocab_lines(count):
    def mutate(folder, rng):
        path = folder / "vocab.txt"
        path.write_text("\n".join(path.read_text().splitlines()[:count]) + "\n")
    return mutate


HF = {
    "roberta": _json_edit("config.json", lambda c: c.update(model_type="roberta",
                                                            architectures=["RobertaForSequenceClassification"])),
    "gpt2": _json_edit("config.json", lambda c: c.update(model_type="gpt2", architectures=["GPT2LMHeadModel"])),
    "architectures-only-roberta": _json_edit("config.json",
                                             lambda c: c.update(architectures=["RobertaForMaskedLM"])),
    "model-type-missing": _json_edit("config.json", lambda c: c.pop("model_type", None)),
    "config-missing": _remove("config.json"),
    "config-truncated": _cut("config.json"),
    "config-not-json": lambda folder, rng: (folder / "config.json").write_text("model_type: bert\n"),
    "weights-missing": _remove("model.safetensors"),
    "weights-truncated": _cut("model.safetensors"),
    "weights-garbage": _garbage("model.safetensors"),
    "vocab-missing": _remove("vocab.txt", "tokenizer.json", "tokenizer_config.json"),
    "vocab-truncated": _cut("vocab.txt"),
    "vocab-shorter-than-vocab-size": _vocab_lines(2000),
    "vocab-size-not-the-vocab": _json_edit("config.json", lambda c: c.update(vocab_size=1000)),
    "heads-not-dividing-hidden": _json_edit("config.json", lambda c: c.update(num_attention_heads=3)),
    "hidden-size-not-the-weights": _json_edit("config.json", lambda c: c.update(hidden_size=256)),
    "layers-not-the-weights": _json_edit("config.json", lambda c: c.update(num_hidden_layers=4)),
    "zero-layers": _json_edit("config.json", lambda c: c.update(num_hidden_layers=0)),
    "zero-positions": _json_edit("config.json", lambda c: c.update(max_position_embeddings=0)),
    "hidden-size-a-string": _json_edit("config.json", lambda c: c.update(hidden_size="128")),
}
GOOGLE = {
    "config-missing": _remove("bert_config.json"),
    "config-truncated": _cut("bert_config.json"),
    "heads-not-dividing-hidden": _json_edit("bert_config.json", lambda c: c.update(num_attention_heads=3)),
    "vocab-size-not-the-vocab": _json_edit("bert_config.json", lambda c: c.update(vocab_size=1000)),
    "hidden-size-not-the-weights": _json_edit("bert_config.json", lambda c: c.update(hidden_size=256)),
    "model-type-roberta": _json_edit("bert_config.json", lambda c: c.update(model_type="roberta")),
    "index-missing": _remove("bert_model.ckpt.index"),
    "data-missing": _remove("bert_model.ckpt.data-*"),
    "data-truncated": _cut("bert_model.ckpt.data-*"),
    "index-garbage": _garbage("bert_model.ckpt.index"),
    "vocab-missing": _remove("vocab.txt"),
    "vocab-shorter-than-vocab-size": _vocab_lines(2000),
}
KERAS = {  # a .keras file (mutated in place as F)
    "truncated": lambda path, rng: path.write_bytes(path.read_bytes()[:rng.randrange(1, path.stat().st_size)]),
    "empty": lambda path, rng: path.write_bytes(b""),
    "garbage": lambda path, rng: path.write_bytes(bytes(rng.randrange(256) for _ in range(4096))),
    "a-json-file": lambda path, rng: path.write_text('{"model_type": "bert"}'),
}
EXPORT = {
    "version-empty": lambda folder, rng: [shutil.rmtree(folder / "1"), (folder / "1").mkdir()],
    "saved-model-garbage": _garbage("1/saved_model.pb"),
    "saved-model-truncated": _cut("1/saved_model.pb"),
    "variables-missing": lambda folder, rng: shutil.rmtree(folder / "1" / "variables"),
    "version-not-a-number": lambda folder, rng: (folder / "1").rename(folder / "one"),
}
MUTATIONS = {"hf": HF, "google": GOOGLE, "keras": KERAS, "task": KERAS, "export": EXPORT}
RANDOMIZED = {"config-truncated", "weights-truncated", "weights-garbage", "vocab-truncated", "data-truncated",
              "index-garbage", "truncated", "garbage", "saved-model-garbage", "saved-model-truncated"}


def _prepare(source: str, mutate, case_id: str):
    """prepare(case_dir, inputs): copies the source to case_dir/F and mutates it there."""
    def prepare(case_dir, inputs):
        src = inputs[SOURCES[source]]
        target = case_dir / "F"
        if src.is_dir():
            shutil.copytree(src, target)
        else:
            shutil.copyfile(src, target)
            target = target.rename(case_dir / "F.keras")
        mutate(target, random.Random(case_id))
    return prepare


def model_cases(variants: int = 2) -> list[Case]:
    """Every (command, source, mutation) case; randomized mutations `variants` times each."""
    cases = []
    for command, (argv, heavy, sources) in COMMANDS.items():
        for source in sources:
            for name, mutate in MUTATIONS[source].items():
                for k in (range(variants) if name in RANDOMIZED else [None]):
                    case_id = f"{command}-{source}-{name}" + ("" if k is None else f"-{k}")
                    keras_file = source in ("keras", "task")
                    rendered = tuple(a.replace("{F}", "{case}/F.keras") if keras_file else a for a in argv)
                    cases.append(Case(case_id, rendered, _prepare(source, mutate, case_id), heavy=heavy,
                                      seconds=40 if heavy else 60))
    return cases
