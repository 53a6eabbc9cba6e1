"""Raw text -> probabilities through exported SavedModels, against a fixed-length export and PyTorch.

    python tools/benchmark_serving.py [--model runs/sst2] [--sentences ../shared/data/SST-2/dev.tsv]
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
  softmax, under torch.inference_mode, at 1 thread and at TF's thread count, its best counted.
Throughput in sentences/s at batch 1 and 32 over real SST-2 dev sentences, and gRPC latency (p50/p99) with 8
concurrent clients sending one sentence each through savedmodels.local_server (TF Serving's PredictionService
protocol and load path over the same SavedModel; the stock server cannot be installed here).

--model is a `bert-keras finetune` output folder; by default the real all-MiniLM-L6-v2 encoder gets a fresh
2-class head (the speed does not depend on the head's values). Sentences: SST-2 dev.tsv from --sentences, else
../shared/data/SST-2/dev.tsv, else the 200 dev sentences shipped in bert_keras/data/samples.
"""

from __future__ import annotations

import argparse
import concurrent.futures
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


def sentences_from(path: str | None) -> tuple[list[str], str]:
    from bert_keras.data import read_glue
    from bert_keras.demo import SAMPLES
    candidates = [path] if path else [str(REPO.parent / "shared" / "data" / "SST-2" / "dev.tsv"),
                                      os.path.join(SAMPLES, "sst2_dev.tsv")]
    for candidate in candidates:
        if candidate and os.path.exists(candidate):
            examples, _ = read_glue("sst-2", candidate)
            return [e.text_a for e in examples], candidate
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


def grpc_latency(base_path: str, name: str, texts: list[str], clients: int, requests: int) -> dict:
    from savedmodels.client import ServingClient
    from savedmodels.local_server import start_server
    server, port = start_server({name: base_path}, workers=clients)
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

    from bert_keras.demo import minilm_folder
    from bert_keras.finetune.trainer import load_backbone
    from bert_keras.tasks import BertClassifier
    from bert_keras.tasks import load_task_model
    if model_folder:
        model = load_task_model(model_folder)
        return model, model.preprocessor, None
    folder = minilm_folder()
    encoder, pre = load_backbone(folder)
    keras.utils.set_random_seed(0)
    model = BertClassifier(encoder, num_classes=2, label_names=["0", "1"], preprocessor=pre)
    model(pre(["warm"]))
    return model, pre, folder


def torch_peer(folder: str, model):
    """transformers on the same encoder weights and the same head values, or None when torch is missing."""
    import numpy as np
    try:
        import torch
        from transformers import BertForSequenceClassification, BertTokenizerFast
    except ImportError:
        return None
    tokenizer = BertTokenizerFast.from_pretrained(folder)
    peer = BertForSequenceClassification.from_pretrained(folder, num_labels=2).eval()
    kernel, bias = (np.asarray(w) for w in model.get_layer("logits").weights)
    with torch.no_grad():
        peer.classifier.weight.copy_(torch.from_numpy(kernel.T.copy()))
        peer.classifier.bias.copy_(torch.from_numpy(bias))

    def run(texts):
        with torch.inference_mode():
            batch = tokenizer(texts, padding="longest", truncation=True, max_length=128, return_tensors="pt")
            return torch.softmax(peer(**batch).logits, -1).numpy()
    run.set_threads = torch.set_num_threads
    return run


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


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a `bert-keras finetune` output folder (default: MiniLM + a fresh head)")
    p.add_argument("--sentences", help="SST-2 dev.tsv")
    p.add_argument("--batch-sizes", default="1,32")
    p.add_argument("--seconds", type=float, default=20.0, help="time budget per measurement (default 20)")
    p.add_argument("--quick", action="store_true", help="3 s per measurement, 20 gRPC requests per client")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "serving.json"))
    args = p.parse_args(argv)
    budget = 3.0 if args.quick else args.seconds

    import numpy as np
    import tensorflow as tf

    from bert_keras.atomic import write_json
    from bert_keras.preprocessing import BertPreprocessor
    from savedmodels.export import export_task_model
    from savedmodels.session_bundle import SessionBundle

    texts, source = sentences_from(args.sentences)
    model, pre, hf_folder = build(args.model)
    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    fixed = BertPreprocessor.from_config({**pre.get_config(), "seq_length": 128, "name": "fixed128"})
    work = tempfile.mkdtemp(prefix="benchmark_serving_")
    ours_path = export_task_model(model, work, "ours", keras_file=False)
    fixed_path = export_task_model(model.with_preprocessor(fixed), work, "fixed128", keras_file=False)
    exports = [("ours", ours_path), ("fixed128", fixed_path)]
    garden_path = garden_export(model, fixed, work)
    if garden_path:
        exports.append(("garden128", garden_path))
    peers = {name: (lambda bundle: lambda b: bundle.run("serving_default", {"text": np.array(b, object)},
                                                         ["probabilities"])["probabilities"])(SessionBundle(path))
             for name, path in exports}
    garden_agreement = (float(np.abs(peers["ours"](texts[:32]) - peers["garden128"](texts[:32])).max())
                        if garden_path else None)
    torch_run = torch_peer(hf_folder, model) if hf_folder else None
    if torch_run:
        peers["torch"] = torch_run
        sample = texts[:32]
        agreement = float(np.abs(peers["ours"](sample) - torch_run(sample)).max())
    results = {}
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        row = results.setdefault(f"batch_{batch}", {})
        for name, fn in peers.items():
            if name == "torch":      # its best thread count: OpenMP spin-waiting makes 2 threads slower on a busy host
                for t in sorted({1, threads}):
                    fn.set_threads(t)
                    row[f"torch_threads_{t}"] = throughput(fn, texts, batch, budget)
                row[name] = max(row[f"torch_threads_{t}"] for t in {1, threads})
            else:
                row[name] = throughput(fn, texts, batch, budget)
            print(f"batch {batch:>3} {name:<9} {row[name]:8.1f} sentences/s", flush=True)
        row["ours_over_fixed128"] = row["ours"] / row["fixed128"]
        if "garden128" in row:
            row["ours_over_garden128"] = row["ours"] / row["garden128"]
        if "torch" in row:
            row["ours_over_torch"] = row["ours"] / row["torch"]
    latency = grpc_latency(os.path.join(work, "ours"), "ours", texts, clients=8, requests=20 if args.quick else 100)
    print(f"gRPC, 8 clients, batch 1: p50 {latency['p50_ms']:.1f} ms, p99 {latency['p99_ms']:.1f} ms, "
          f"{latency['requests_per_second']:.1f} requests/s")
    report = {"benchmark": "serving", "sentences": source, "num_sentences": len(texts),
              "mean_words": float(np.mean([len(t.split()) for t in texts])), "model": args.model or "all-MiniLM-L6-v2",
              "throughput_sentences_per_second": results, "grpc": latency,
              "max_probability_difference_vs_torch": agreement if torch_run else None,
              "max_probability_difference_vs_garden128": garden_agreement,
              "host": {"cpus": os.cpu_count(), "threads": threads, "python": platform.python_version(),
                       "tensorflow": tf.__version__}, "seconds_per_measurement": budget}
    write_json(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
