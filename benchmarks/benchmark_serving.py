"""Raw text -> probabilities through exported SavedModels, against a fixed-length export and PyTorch.

    python benchmarks/benchmark_serving.py [--model runs/sst2] [--sentences ../shared/data/SST-2/dev.tsv]
                                      [--out benchmarks/results/serving.json] [--quick]

One run, one process (PyTorch in the same process):
- ours: the SST-2 classifier exported by savedmodels.export (per-batch padding: longest sentence, multiple of 8),
  loaded as TF Serving loads it (savedmodels.session_bundle: the restore op, then Session.run on the
  SignatureDef's tensors), `serving_default` fed raw strings; every export below runs on that path;
- fixed128: the same model exported with a preprocessor fixed at seq_length 128 (what TF Hub's BERT
  preprocessors and most exports do); our encoder still skips the padding in its position-wise parts, so this
  isolates what per-batch padding saves in attention;
- garden128: the way TF Hub's BERT SavedModels serve: the same weights in the Model Garden's BertEncoder (which
  computes all 128 positions) behind the fixed-128 preprocessor (needs tf-models-official, the [garden] extra);
- torch: transformers BertTokenizerFast + BertForSequenceClassification on the same weights, padding="longest",
  softmax, under torch.inference_mode, at 1 thread and at TF's thread count, its best counted;
- onnxruntime, onnxruntime_int8: that PyTorch model object exported by torch.onnx.export (opset 17, dynamic batch
  and sequence axes; benchmarks/onnx_peer.py) and run by an onnxruntime InferenceSession (ORT_ENABLE_ALL,
  intra_op_num_threads at 1 and at TF's thread count, its best counted, as for torch), fp32 and dynamically
  quantized (quantize_dynamic, QInt8 weights per channel), with the same BertTokenizerFast, padding="longest",
  softmax in NumPy. Checked before timing: the HF tokenizer's ids equal our preprocessor's and ORT fp32 logits
  equal PyTorch's to 1e-4 on the first batch (asserted); int8's largest logit difference from fp32 and its argmax
  agreement with fp32 over all the sentences go in the JSON ("onnxruntime"), with ours/peer throughput ratios in
  each batch's row.
- ours_bf16, ours_int8: the same model through `bert-keras export --precision bf16|int8` (savedmodels/precision.py),
  with the accuracy of each precision's SavedModel on the labelled sentences and its drop from fp32 ("accuracy";
  meaningful with a fine-tuned --model), and whether the CPU has the instructions ("cpu_flags",
  "precision_native").
- ours_xla: the same model through `bert-keras export --xla` (savedmodels/xla.py: encoder + head in one jit_compile
  function on length buckets 16/32/64/128/max and batch sizes 1-32), on the same session path with XLA:CPU on
  (SessionBundle(xla_cpu_compilation_enabled=True), TF Serving's --xla_cpu_compilation_enabled=true), its warm-up
  records (buckets up to 128: WARMUP_MAX_LENGTH) replayed first as the server does at load ("xla": records,
  seconds, compilations). Then the first request of shapes the warm-up did not send (batch 3, 5, 12, 20 and other
  lengths, inside the warmed buckets) against the median of its next 5: XLA's compilations are counted from its
  module dumps (XLA_FLAGS=--xla_dump_to), and should not grow ("new_shape_first_request").
- matmul_floor: the export's dense matmuls and nothing else, at each batch's real token counts (benchmarks/matmul_floor.py):
  what ours would reach if every other op cost nothing; "matmul_floor_over_onnxruntime" < 1 means no graph
  overhead removed could catch ORT with TensorFlow's matmul kernels.
Throughput in sentences/s at batch 1 and 32 over real SST-2 dev sentences, and gRPC latency (p50/p99) with 8
concurrent clients sending one sentence each through savedmodels.local_server (TF Serving's PredictionService
protocol and load path over the same SavedModel; the stock server cannot be installed here), without and with
server-side batching (the batching_parameters.txt `bert-keras export` writes).

--model is a `bert-keras finetune` output folder (its classifier's weights are copied into a transformers
BertForSequenceClassification for the torch and onnxruntime peers, its vocabulary into a BertTokenizerFast); by
default the real all-MiniLM-L6-v2 encoder gets a fresh 2-class head (the speed does not depend on the head's
values) and transformers loads the same Hugging Face folder. Sentences: SST-2 dev.tsv from --sentences, else
../shared/data/SST-2/dev.tsv, else the 200 dev sentences shipped in bert_keras/data/samples.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")      # as bert_keras sets it (before TensorFlow loads)
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from serving_frame import budget as budget_of, parser, run_in_work_folder  # noqa: E402


def sentences_from(path: str | None) -> tuple[list[str], str, list[int]]:
    from bert_keras.data import read_glue
    from bert_keras.data import SAMPLES
    candidates = [path] if path else [str(REPO.parent / "shared" / "data" / "SST-2" / "dev.tsv"),
                                      os.path.join(SAMPLES, "sst2_dev.tsv")]
    for candidate in candidates:
        if candidate and os.path.exists(candidate):
            examples, _ = read_glue("sst-2", candidate)
            return [e.text_a for e in examples], candidate, [e.label for e in examples]
    raise FileNotFoundError(f"no SST-2 dev.tsv at {candidates}")


def throughput(fn, texts: list[str], batch: int, budget_s: float) -> float:
    """Sentences per second over consecutive batches of `texts` (cycled), after two warm-up calls."""
    batches = [texts[i:i + batch] for i in range(0, len(texts) - batch + 1, batch)]
    fn(batches[0])
    fn(batches[-1])
    done, start = 0, time.perf_counter()
    while True:
        for b in batches:
            fn(b)
            done += len(b)
            if time.perf_counter() - start > budget_s and done >= 8 * batch:
                return done / (time.perf_counter() - start)


def served(bundle):
    """A list of sentences -> probabilities [B, C], through a SessionBundle's `serving_default` signature."""
    import numpy as np
    return lambda texts: bundle.run("serving_default", {"text": np.array(texts, object)},
                                    ["probabilities"])["probabilities"]


def grpc_latency(base_path: str, name: str, texts: list[str], clients: int, requests: int, batching=None) -> dict:
    from savedmodels.client import ServingClient
    from savedmodels.local_server import start_server
    server, port = start_server({name: base_path}, workers=clients, batching=batching)
    try:
        stubs = [ServingClient(f"127.0.0.1:{port}", name) for _ in range(clients)]
        # The measured request, once a client: a session builds one executor per set of fed and fetched tensors, so
        # the first request with output_filter=["probabilities"] pays for it (the warmup records fetch every output).
        for stub in stubs:
            stub.predict({"text": texts[:1]}, output_filter=["probabilities"])

        def worker(k: int) -> list[float]:
            times = []
            for i in range(requests):
                t = time.perf_counter()
                stubs[k].predict({"text": [texts[(k * requests + i) % len(texts)]]}, output_filter=["probabilities"])
                times.append(time.perf_counter() - t)
            return times

        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            times = sorted(t for ts in pool.map(worker, range(clients)) for t in ts)
        wall = time.perf_counter() - start
    finally:
        server.stop(0)
    return {"clients": clients, "requests": len(times), "p50_ms": 1000 * statistics.median(times),
            "p99_ms": 1000 * times[min(len(times) - 1, int(0.99 * len(times)))], "requests_per_second": len(times) / wall}


def build(model_folder: str | None):
    """(task model, preprocessor, HF folder of the same weights or None)."""
    import keras

    from bert_keras.loading import bundled_minilm_folder
    from bert_keras.loading import load_backbone
    from bert_keras.tasks import BertClassifier
    from bert_keras.tasks import load_task_model
    if model_folder:
        model = load_task_model(model_folder)
        return model, model.preprocessor, None
    folder = bundled_minilm_folder()
    encoder, pre = load_backbone(folder)
    keras.utils.set_random_seed(0)
    model = BertClassifier(encoder, num_classes=2, label_names=["0", "1"], preprocessor=pre)
    model(pre(["warm"]))
    return model, pre, folder


def hf_classifier(model, folder: str | None):
    """(BertTokenizerFast, BertForSequenceClassification in eval mode) on `model`'s weights, or None when
    transformers is missing. The encoder comes from the Hugging Face `folder` it was loaded from, else (a --model
    run) is copied from the Keras encoder (google names -> transformers names, kernels transposed) with the
    tokenizer on the preprocessor's vocabulary; the head is the Keras model's `logits` layer either way."""
    import numpy as np
    try:
        import torch
        from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast
    except ImportError:
        return None
    kernel, bias = (np.asarray(w) for w in model.get_layer("logits").weights)
    if folder:
        tokenizer = BertTokenizerFast.from_pretrained(folder)
        peer = BertForSequenceClassification.from_pretrained(folder, num_labels=kernel.shape[1])
    else:
        from bert_keras.checkpoints.huggingface import google_name
        from bert_keras.checkpoints.names import encoder_weights
        c = model.encoder.config
        peer = BertForSequenceClassification(BertConfig(
            vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
            num_attention_heads=c.num_attention_heads, intermediate_size=c.intermediate_size, hidden_act=c.hidden_act,
            max_position_embeddings=c.max_position_embeddings, type_vocab_size=c.type_vocab_size,
            layer_norm_eps=c.layer_norm_eps, num_labels=kernel.shape[1]))
        weights = encoder_weights(model.encoder)
        state = {}
        for name in peer.state_dict():
            if not name.startswith("classifier."):
                google = google_name(name)
                value = weights[google].T if google.endswith("/kernel") else weights[google]
                state[name] = torch.from_numpy(np.ascontiguousarray(value))
        missing = peer.load_state_dict(state, strict=False).missing_keys
        assert sorted(missing) == ["classifier.bias", "classifier.weight"], missing
        # A folder for from_pretrained: transformers 5's BertTokenizerFast ignores a vocab_file= argument.
        vocab = tempfile.mkdtemp(prefix="benchmark_serving_vocab_")
        with open(os.path.join(vocab, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(model.preprocessor.vocab) + "\n")
        with open(os.path.join(vocab, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"do_lower_case": model.preprocessor.lower_case}, f)
        tokenizer = BertTokenizerFast.from_pretrained(vocab)
    with torch.no_grad():
        peer.classifier.weight.copy_(torch.from_numpy(kernel.T.copy()))
        peer.classifier.bias.copy_(torch.from_numpy(bias))
    return tokenizer, peer.eval()


def softmax(z):
    import numpy as np
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def tokenize(tokenizer, texts, tensors: str):
    return tokenizer(texts, padding="longest", truncation=True, max_length=128, return_tensors=tensors)


def check_tokenizer(tokenizer, pre, texts: list[str]) -> None:
    """The HF tokenizer gives the ids our preprocessor gives (padding aside), or the peers would not be peers."""
    import numpy as np
    ours, theirs = pre(texts), tokenize(tokenizer, texts, "np")
    for row, (ids, mask) in enumerate(zip(np.asarray(ours["input_word_ids"]), np.asarray(ours["input_mask"]))):
        hf_ids = theirs["input_ids"][row][theirs["attention_mask"][row] == 1]
        assert ids[mask == 1].tolist() == hf_ids.tolist(), f"HF tokenizer ids differ from ours on {texts[row]!r}"


def torch_peer(tokenizer, peer):
    """transformers on the same weights: texts -> probabilities; .logits(texts) for the checks."""
    import torch

    def logits(texts):
        with torch.inference_mode():
            return peer(**tokenize(tokenizer, texts, "pt")).logits

    def run(texts):
        return torch.softmax(logits(texts), -1).numpy()
    run.logits = lambda texts: logits(texts).numpy()
    run.set_threads = torch.set_num_threads
    return run


def onnx_peers(tokenizer, peer, threads: int, work: str):
    """{"onnxruntime": fp32, "onnxruntime_int8": int8} runners over `peer` (the torch peer's model object) exported
    to ONNX, plus the description for the JSON; None when onnxruntime (or onnx) is missing."""
    import numpy as np
    try:
        import onnx  # noqa: F401  (torch.onnx.export writes through it)
        import onnxruntime  # noqa: F401
    except ImportError:
        return None
    import onnx_peer
    names = ["input_ids", "attention_mask", "token_type_ids"]
    fp32 = onnx_peer.export(peer, names, "logits", os.path.join(work, "classifier.onnx"))
    int8 = onnx_peer.quantize_int8(fp32)

    def runner(path):
        sessions = {t: onnx_peer.make_session(path, t) for t in {1, threads}}
        current = [sessions[threads]]

        def logits(texts):
            batch = tokenize(tokenizer, texts, "np")
            return current[0].run(["logits"], {n: batch[n].astype(np.int64) for n in names})[0]

        def run(texts):
            return softmax(logits(texts))
        run.logits = logits
        run.set_threads = lambda t: current.__setitem__(0, sessions[t])
        return run
    runs = {"onnxruntime": runner(fp32), "onnxruntime_int8": runner(int8)}
    return runs, onnx_peer.describe(threads, fp32, int8)


def onnx_checks(runs: dict, torch_run, texts: list[str], first: int) -> dict:
    """ORT fp32 against PyTorch on the first batch (asserted to 1e-4), int8 against fp32 over every sentence."""
    import numpy as np
    reference, fp32 = torch_run.logits(texts[:first]), runs["onnxruntime"].logits(texts[:first])
    vs_torch = float(np.abs(fp32 - reference).max())
    assert vs_torch <= 1e-4, f"ONNX Runtime fp32 logits differ from PyTorch's by {vs_torch} on the first batch"
    chunks = [texts[i:i + 32] for i in range(0, len(texts), 32)]
    full = np.concatenate([runs["onnxruntime"].logits(b) for b in chunks])
    int8 = np.concatenate([runs["onnxruntime_int8"].logits(b) for b in chunks])
    return {"fp32_max_logit_difference_vs_torch": vs_torch, "fp32_checked_sentences": first,
            "max_abs_logit": float(np.abs(full).max()),     # the scale the differences are read against
            "int8_max_logit_difference_vs_fp32": float(np.abs(int8 - full).max()),
            "int8_max_probability_difference_vs_fp32": float(np.abs(softmax(int8) - softmax(full)).max()),
            "int8_argmax_agreement_vs_fp32": float(np.mean(int8.argmax(-1) == full.argmax(-1))),
            "int8_checked_sentences": len(texts)}


def garden_export(model, fixed, path: str) -> str | None:
    """The same weights served the way TF Hub's BERT SavedModels are (they were exported from the Model Garden's
    BertEncoder, which computes every one of the 128 positions): our fixed-128 preprocessor, Model Garden's
    BertEncoder holding the encoder's weights (written as a google-research checkpoint and converted by the
    Model Garden's own converter), our classifier's dense head. None when tf-models-official is not installed."""
    try:
        from official.legacy.bert import configs
        from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter
    except ImportError:
        return None
    import tensorflow as tf

    from bert_keras import save_google_checkpoint
    from bert_keras.checkpoints.garden import garden_bert_encoder
    from savedmodels.saving import save_servable
    prefix = save_google_checkpoint(model.encoder, os.path.join(path, "tf1"))
    converter.convert_checkpoint(configs.BertConfig.from_json_file(os.path.join(path, "tf1", "bert_config.json")),
                                 os.path.join(path, "tf2", "bert_model.ckpt"), prefix, checkpoint_model_name="encoder")
    encoder = garden_bert_encoder(model.encoder.config)
    tf.train.Checkpoint(encoder=encoder).read(
        tf.train.latest_checkpoint(os.path.join(path, "tf2"))).assert_existing_objects_matched()
    kernel, bias = (tf.constant(w) for w in model.get_layer("logits").get_weights())

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(text):
        pooled = encoder(fixed(text), training=False)["pooled_output"]
        return {"probabilities": tf.nn.softmax(tf.matmul(pooled, kernel) + bias)}
    out = os.path.join(path, "garden128")
    save_servable(out, {"serving_default": serve.get_concrete_function()})
    return out


def xla_compiles(work: str) -> int:
    """XLA compilations so far in this process: one module dump each (XLA_FLAGS=--xla_dump_to, set in main)."""
    folder = os.path.join(work, "xla_dump")
    return sum(n.endswith(".before_optimizations.txt") for n in os.listdir(folder)) if os.path.isdir(folder) else 0


# SST-2 sentences pack well under 128 tokens: the warm-up stops at the 128 bucket (`export --xla
# --xla-warmup-max-length 128`) instead of MiniLM's 512 (all 30 shapes took 2772 s to warm on a busy host).
WARMUP_MAX_LENGTH = 128


def xla_peer(model, work: str, peers: dict, texts: list[str]) -> dict:
    """Exports `model` with --xla, loads it on the session path with XLA:CPU on, replays its warm-up records (as
    TF Serving at load), adds it to `peers` as "ours_xla"; then times the first request of shapes the warm-up did
    not send against the median of the next 5, counting XLA compilations."""
    import numpy as np

    from savedmodels.export import export_task_model
    from savedmodels.session_bundle import SessionBundle
    from savedmodels.xla import XlaShapes
    shapes = XlaShapes.for_model(model, warmup_max_length=WARMUP_MAX_LENGTH)
    path = export_task_model(model, work, "ours_xla", keras_file=False, xla=shapes)
    bundle = SessionBundle(path, xla_cpu_compilation_enabled=True)
    start = time.perf_counter()
    records = bundle.warmup()
    report = {"lengths": list(shapes.lengths), "batch_sizes": list(shapes.batch_sizes),
              "warmup_lengths": list(shapes.warmup_lengths), "warmup_records": records,
              "warmup_seconds": time.perf_counter() - start, "compilations_after_warmup": xla_compiles(work)}
    run = served(bundle)
    peers["ours_xla"] = run
    print(f"ours_xla: {records} warm-up records in {report['warmup_seconds']:.1f} s, "
          f"{report['compilations_after_warmup']} XLA compilations", flush=True)
    # The session builds one executor per set of fed and fetched tensors: pay for this fetch set ("probabilities";
    # the warm-up records fetch every output) on a warmed shape first, so the first requests below time XLA only.
    run(texts[:1])
    by_length = sorted(texts, key=len)
    firsts = []
    for batch, where in ((3, 0.5), (5, 0.9), (12, 0.99), (20, 0.2), (1, 1.0)):
        i = min(int(where * len(by_length)), len(by_length) - batch)
        sample = by_length[i:i + batch]
        before = xla_compiles(work)
        t = time.perf_counter()
        run(sample)
        first = time.perf_counter() - t
        after = xla_compiles(work)
        repeats = []
        for _ in range(5):
            t = time.perf_counter()
            run(sample)
            repeats.append(time.perf_counter() - t)
        packed = model.preprocessor(sample)["input_word_ids"].shape
        firsts.append({"batch": batch, "packed_length": int(packed[1]), "first_ms": 1000 * first,
                       "median_next_5_ms": 1000 * statistics.median(repeats),
                       "first_over_median": first / statistics.median(repeats), "new_compilations": after - before})
        print(f"ours_xla new shape batch {batch} length {packed[1]}: first {1000 * first:.1f} ms, then "
              f"{1000 * statistics.median(repeats):.1f} ms, {after - before} new compilations", flush=True)
    report["new_shape_first_request"] = firsts
    report["new_compilations_after_warmup"] = sum(f["new_compilations"] for f in firsts)
    sample = texts[:64]
    report["max_probability_difference_vs_ours"] = float(np.abs(run(sample) - peers["ours"](sample)).max())
    return report


def main(argv=None) -> None:
    """Runs the benchmark; its exports (and ONNX files, ~110 MB for MiniLM) live in a temporary folder removed at
    the end."""

    def count_xla_compilations(work: str) -> None:
        # Count XLA compilations from XLA's module dumps (set before TensorFlow loads; only ours_xla compiles).
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={os.path.join(work, 'xla_dump')}"
    run_in_work_folder(_main, argv, "benchmark_serving_", before=count_xla_compilations)


def _main(argv, work: str) -> None:
    p = parser(__doc__, seconds=20.0, quick_seconds=3.0, out="serving.json",
               quick_help="3 s per measurement, 20 gRPC requests per client")
    p.add_argument("--skip", default="", help="comma-separated rows to leave out (e.g. garden128,ours_int8,torch)")
    args = p.parse_args(argv)
    budget = budget_of(args)

    import numpy as np
    import tensorflow as tf

    from bert_keras.atomic import write_json
    from bert_keras.preprocessing import BertPreprocessor
    from savedmodels.batching import BatchingParameters
    from savedmodels.export import export_task_model, write_batching_parameters
    from savedmodels.precision import PRECISIONS, cpu_flags, cpu_support, with_precision
    from savedmodels.session_bundle import SessionBundle

    skip = set(filter(None, args.skip.split(",")))
    load_before = os.getloadavg()
    texts, source, labels = sentences_from(args.sentences)
    model, pre, hf_folder = build(args.model)
    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    fixed = BertPreprocessor.from_config({**pre.get_config(), "seq_length": 128, "name": "fixed128"})
    ours_path = export_task_model(model, work, "ours", keras_file=False)
    fixed_path = export_task_model(model.with_preprocessor(fixed), work, "fixed128", keras_file=False)
    exports = [("ours", ours_path), ("fixed128", fixed_path)]
    for kind in PRECISIONS[1:]:                       # the same model exported in bf16 and int8 (export --precision)
        if f"ours_{kind}" in skip:
            continue
        exports.append((f"ours_{kind}", export_task_model(with_precision(model, kind), work, f"ours_{kind}",
                                                          keras_file=False)))
    garden_path = garden_export(model, fixed, work) if "garden128" not in skip else None
    if garden_path:
        exports.append(("garden128", garden_path))
    peers = {name: served(SessionBundle(path)) for name, path in exports}
    xla_report = xla_peer(model, work, peers, texts) if "ours_xla" not in skip else None
    garden_agreement = (float(np.abs(peers["ours"](texts[:32]) - peers["garden128"](texts[:32])).max())
                        if garden_path else None)
    # Accuracy of each precision on the labelled sentences, through its SavedModel on the session path.
    accuracy = {}
    for name in [n for n in ["ours"] + [f"ours_{kind}" for kind in PRECISIONS[1:]] + ["ours_xla"] if n in peers]:
        predicted = np.concatenate([peers[name](texts[i:i + 64]).argmax(-1) for i in range(0, len(texts), 64)])
        accuracy[name] = float((predicted == np.array(labels)).mean())
        if name != "ours":
            accuracy[f"{name}_drop_points"] = 100 * (accuracy["ours"] - accuracy[name])
        print(f"{name:<10} accuracy {accuracy[name]:.4f} on {len(texts)} labelled sentences", flush=True)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    hf = hf_classifier(model, hf_folder)
    if hf:
        check_tokenizer(hf[0], pre, texts[:max(batch_sizes)])
    torch_run = torch_peer(*hf) if hf else None
    onnx = onnx_peers(*hf, threads, work) if hf and "onnxruntime" not in skip else None
    if torch_run and "torch" not in skip:
        peers["torch"] = torch_run
        sample = texts[:32]
        agreement = float(np.abs(peers["ours"](sample) - torch_run(sample)).max())
    onnx_report = None
    if onnx:
        runs, onnx_report = onnx
        onnx_report.update(onnx_checks(runs, torch_run, texts, max(batch_sizes)))
        print("onnxruntime: fp32 vs torch max |logit diff| {fp32_max_logit_difference_vs_torch:.2e}; int8 vs fp32 "
              "{int8_max_logit_difference_vs_fp32:.3f}, argmax agreement {int8_argmax_agreement_vs_fp32:.4f} over "
              "{int8_checked_sentences} sentences".format(**onnx_report), flush=True)
        peers.update(runs)
    # A lower bound for ours: the export's dense matmuls alone (benchmarks/matmul_floor.py), fed each batch's token counts.
    from matmul_floor import MatmulFloor
    floor = MatmulFloor(model.encoder.config, len(model.label_names))
    token_counts = dict(zip(texts, np.concatenate([pre(texts[i:i + 256])["input_mask"].numpy().sum(axis=1)
                                                   for i in range(0, len(texts), 256)])))
    peers["matmul_floor"] = lambda b: floor.run([token_counts[t] for t in b])
    results = {}
    for batch in batch_sizes:
        row = results.setdefault(f"batch_{batch}", {})
        for name, fn in peers.items():
            # torch and onnxruntime at their best thread count: their workers spin-wait, which makes 2 threads
            # slower than 1 on a busy host (TF's pool does not; ours runs at `threads`)
            if hasattr(fn, "set_threads"):
                for t in sorted({1, threads}):
                    fn.set_threads(t)
                    row[f"{name}_threads_{t}"] = throughput(fn, texts, batch, budget)
                fn.set_threads(threads)
                row[name] = max(row[f"{name}_threads_{t}"] for t in {1, threads})
            else:
                row[name] = throughput(fn, texts, batch, budget)
            print(f"batch {batch:>3} {name:<16} {row[name]:8.1f} sentences/s", flush=True)
        row["ours_over_fixed128"] = row["ours"] / row["fixed128"]
        if "ours_xla" in row:
            row["ours_xla_over_ours"] = row["ours_xla"] / row["ours"]
        row["ours_over_matmul_floor"] = row["ours"] / row["matmul_floor"]
        if "garden128" in row:
            row["ours_over_garden128"] = row["ours"] / row["garden128"]
        for peer in ("torch", "onnxruntime", "onnxruntime_int8"):
            if peer in row:
                for ours in [n for n in ["ours"] + [f"ours_{kind}" for kind in PRECISIONS[1:]] + ["ours_xla"]
                             if n in row]:
                    row[f"{ours}_over_{peer}"] = row[ours] / row[peer]
                # and at ours' own thread count, which the best-of above need not be
                row[f"ours_over_{peer}_threads_{threads}"] = row["ours"] / row[f"{peer}_threads_{threads}"]
                if "ours_xla" in row:
                    row[f"ours_xla_over_{peer}_threads_{threads}"] = row["ours_xla"] / row[f"{peer}_threads_{threads}"]
                row[f"matmul_floor_over_{peer}"] = row["matmul_floor"] / row[peer]
    requests = 20 if args.quick else 100
    latency = grpc_latency(os.path.join(work, "ours"), "ours", texts, clients=8, requests=requests)
    # Server-side batching with the parameters `bert-keras export` writes (batching_parameters.txt).
    batching = BatchingParameters.read(write_batching_parameters(work))
    batched = grpc_latency(os.path.join(work, "ours"), "ours", texts, clients=8, requests=requests,
                           batching=batching)
    batched["batching_parameters"] = batching.to_text()
    for label, run in (("unbatched", latency), ("batched", batched)):
        print(f"gRPC, 8 clients, batch 1, {label}: p50 {run['p50_ms']:.1f} ms, p99 {run['p99_ms']:.1f} ms, "
              f"{run['requests_per_second']:.1f} requests/s", flush=True)
    report = {"benchmark": "serving", "sentences": source, "num_sentences": len(texts),
              "mean_words": float(np.mean([len(t.split()) for t in texts])), "model": args.model or "all-MiniLM-L6-v2",
              "throughput_sentences_per_second": results, "grpc": latency, "grpc_batched": batched,
              "accuracy": accuracy, "xla": xla_report,
              "load_average": {"before": load_before, "after": os.getloadavg(),
                               "note": "a shared host (about 7 other workers on its 2 cores): compare the ratios "
                                       "within this run, not the absolute figures across runs"},
              "cpu_flags": sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni",
                                                 "avx_vnni", "amx_int8"}),
              "precision_native": {kind: cpu_support(kind) for kind in PRECISIONS},
              "max_probability_difference_vs_torch": agreement if "torch" in peers else None,
              "max_probability_difference_vs_garden128": garden_agreement, "onnxruntime": onnx_report,
              "host": {"cpus": os.cpu_count(), "threads": threads, "python": platform.python_version(),
                       "tensorflow": tf.__version__}, "seconds_per_measurement": budget}
    write_json(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
