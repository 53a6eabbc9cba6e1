"""The good inputs the fuzzer mutates, written once per test module (`fuzz_inputs`): bert_tiny models
in every form the commands read (a .keras encoder, a fine-tuned-shaped task model, a Hugging Face folder, a
google-research checkpoint, a TF Serving export), with all-MiniLM-L6-v2's vocabulary; a small file of every data
format the CLI reads; pretraining records (written once per test process: session-scoped, as each xdist worker
runs its own session). The generators copy one of these into a case's own folder and change
it; the shared folder itself must stay as it is (the oracle checks).

    from fuzz_inputs import fuzz_inputs    # the fixture, in a test module
"""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

SST2 = "sentence\tlabel\ngreat film\t1\nbad film\t0\nnice and warm\t1\nawful , dull\t0\nfun\t1\n"
MRPC = ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\the went home\the left for home\n"
        "0\t3\t4\tthe cat sat\ta dog ran\n1\t5\t6\tit is cold\tit is not warm\n0\t7\t8\tyes\tno\n")
STSB = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        "0\tmain\tf\t2012\t1\tnone\tnone\ta man plays\ta man is playing\t4.5\n"
        "1\tmain\tf\t2012\t2\tnone\tnone\ta cat\ta car\t0.5\n2\tmain\tf\t2012\t3\tnone\tnone\tgo\tleave\t2.0\n")
SQUAD = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
    {"context": "The cat sat on the mat in Paris last year .",
     "qas": [{"id": "q1", "question": "where did the cat sit ?",
              "answers": [{"text": "on the mat", "answer_start": 12}]},
             {"id": "q2", "question": "which city ?", "answers": [{"text": "Paris", "answer_start": 26}]}]},
    {"context": "Bert is a model that reads text in both directions .",
     "qas": [{"id": "q3", "question": "what is bert ?", "answers": [{"text": "a model", "answer_start": 8}]}]}]}]}
SWAG_HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"
SWAG = SWAG_HEADER + "\n" + "\n".join(
    f"{i},v{i},{i},He opens the door. He,He opens the door.,He,gold,walks in.,flies away.,eats it.,sings.,{i % 4}"
    for i in range(4)) + "\n"
OBQA = "\n".join(json.dumps({"id": f"q{i}", "question": {"stem": f"what is {i} ?", "choices": [
    {"text": t, "label": k} for t, k in zip(("one", "two", "three", "four"), "ABCD")]}, "answerKey": "ABCD"[i % 4]})
    for i in range(4)) + "\n"
CONLL = ("-DOCSTART- -X- -X- O\n\nJohn NNP B-NP B-PER\nlives VBZ B-VP O\nin IN B-PP O\nParis NNP B-NP B-LOC\n"
         ". . O O\n\nMary NNP B-NP B-PER\nruns VBZ B-VP O\n. . O O\n\nBerlin NNP B-NP B-LOC\nis VBZ B-VP O\n"
         "big JJ B-ADJP O\n. . O O\n")
CORPUS = ("the cat sat on the mat .\nit was a sunny day .\nthe dog ran in the park .\n\n"
          "bert reads text in both directions .\nit was trained on books .\nand on wikipedia .\n\n"
          "a third document starts here .\nit has two more lines .\nthis is the last one .\n")
BATCHING = "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 1000 }\nnum_batch_threads { value: 2 }\n"

DATA = {"sst2.tsv": SST2, "mrpc.tsv": MRPC, "stsb.tsv": STSB, "squad.json": json.dumps(SQUAD), "swag.csv": SWAG,
        "obqa.jsonl": OBQA, "conll.txt": CONLL, "corpus.txt": CORPUS, "batching.txt": BATCHING,
        "a_file": "not a folder\n", "empty.txt": ""}


def build_inputs(root: pathlib.Path, minilm_dir: str) -> dict:
    """Writes the good inputs under `root`; returns {name: path} (`root` included)."""
    import keras

    from bert_keras import PRESETS, BertEncoder, BertPreprocessor, save_google_checkpoint
    from bert_keras.checkpoints.huggingface import write_huggingface
    from bert_keras.checkpoints.names import encoder_weights
    from bert_keras.tasks import BertClassifier
    d = {"root": root, "vocab": root / "vocab.txt", "a_folder": root / "a_folder"}
    shutil.copyfile(pathlib.Path(minilm_dir) / "vocab.txt", d["vocab"])
    d["a_folder"].mkdir()
    for name, text in DATA.items():
        (root / name).write_text(text, encoding="utf-8")
        d[name] = root / name
    conll_dir = root / "conll2003"
    conll_dir.mkdir()
    for name in ("train.txt", "valid.txt", "test.txt"):
        (conll_dir / name).write_text(CONLL * 3, encoding="utf-8")
    d["conll_dir"] = conll_dir
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(PRESETS["bert_tiny"])
    d["tiny.keras"] = root / "tiny.keras"
    encoder.save(d["tiny.keras"])
    d["hf_tiny"] = root / "hf_tiny"
    write_huggingface(encoder_weights(encoder), str(d["hf_tiny"]), encoder.config, vocab_file=str(d["vocab"]),
                      lower_case=True)
    d["google_tiny"] = root / "google_tiny"
    save_google_checkpoint(encoder, str(d["google_tiny"]), vocab_file=str(d["vocab"]))
    classifier = BertClassifier(encoder, 2, label_names=["0", "1"],
                                preprocessor=BertPreprocessor(str(d["vocab"]), max_seq_length=16))
    d["task.keras"] = root / "task.keras"
    classifier.save(d["task.keras"])
    return d


def build_records(d: dict) -> None:
    """Pretraining records of the corpus (max_seq_length 16), written by the command itself: d["records"]."""
    from bert_keras_cli.main import main
    prefix = d["root"] / "records" / "corpus"
    code = main(["pretraining-data", str(d["corpus.txt"]), "--vocab", str(d["vocab"]), "--out", str(prefix),
                 "--workers", "1", "--dupe-factor", "2", "--max-seq-length", "16", "--max-predictions-per-seq", "3",
                 "--quiet"])
    assert code == 0
    [d["records"]] = sorted((d["root"] / "records").glob("corpus-*.tfrecord"))


def build_export(d: dict) -> None:
    """A TF Serving base path holding the task model's export (version 1): d["export"]."""
    from bert_keras.tasks import load_task_model
    from savedmodels.export import export_for_serving
    export_for_serving(load_task_model(str(d["task.keras"])), str(d["root"] / "serving"), "m", 1, "fp32")
    d["export"] = d["root"] / "serving" / "m"


@pytest.fixture(scope="session")
def fuzz_inputs(tmp_path_factory, minilm_dir) -> dict:
    """The good inputs, once per test process (build_inputs, build_records)."""
    d = build_inputs(tmp_path_factory.mktemp("fuzz_inputs"), minilm_dir)
    build_records(d)
    return d
