"""`bert-keras`: the command-line tool. Each subcommand is a thin wrapper over the library."""

from __future__ import annotations

import argparse
import json
import os
import sys

from bert_keras_cli import attention
from bert_keras_cli import fill_mask
from bert_keras_cli import inside
from bert_keras_cli.errors import CommandError
from bert_keras_cli.flag_types import (fraction, non_negative_float, non_negative_int, positive_float,
                                        positive_int)
from bert_keras_cli.model_flags import add_model_flags, lower_case
from bert_keras_cli.output_paths import output_file, output_folder
from bert_keras_cli.version import VersionAction
from savedmodels.precision import LITERT_PRECISIONS, PRECISIONS

# The environment defaults (Keras backend, oneDNN, TensorFlow's log level) are set by bert_keras/__init__.py when a
# command first imports it; TensorFlow's log lines are off for the command before that, in main()
# (absl_logs.quiet_tensorflow_logs).



def cmd_presets(args) -> None:
    from bert_keras.config import PRESETS
    print(f"{'preset':<12} {'layers':>6} {'hidden':>6} {'heads':>5} {'parameters':>12}")
    for name, c in PRESETS.items():
        print(f"{name:<12} {c.num_hidden_layers:>6} {c.hidden_size:>6} {c.num_attention_heads:>5} "
              f"{c.num_parameters():>12,}")


def cmd_convert(args) -> None:
    from bert_keras.atomic import atomic_file
    from bert_keras.checkpoints import load_checkpoint_with_heads, save_google_checkpoint
    if not args.out and not args.google_out and not args.hf_out:
        raise CommandError("Nothing to write: give --out model.keras, --google-out DIR and/or --hf-out DIR.")
    output_file(args.out, "--out", ".keras")
    output_folder(args.google_out, "--google-out")
    output_folder(args.hf_out, "--hf-out")
    task_model = _task_model_source(args.checkpoint)
    if task_model is not None:
        return _convert_task_model(task_model, args)
    vocab, lower = _checkpoint_vocabulary(args.checkpoint)       # vocab.txt, else tokenizer.json; or none
    try:
        config, encoder, heads = load_checkpoint_with_heads(args.checkpoint)
    except (FileNotFoundError, ValueError) as e:
        raise CommandError(str(e)) from None
    print(f"read {args.checkpoint}: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
          f"{encoder.count_params():,} parameters")
    if args.out:
        with atomic_file(args.out) as tmp:
            encoder.save(tmp)
        print(f"wrote {args.out} (keras.models.load_model after `import bert_keras`)")
    if args.google_out:
        prefix = save_google_checkpoint(encoder, args.google_out, vocab_file=vocab, heads=heads)
        print(f"wrote google-research TF1 checkpoint {prefix}" + (" with the cls/ heads" if heads else ""))
    if args.hf_out:
        from bert_keras.checkpoints.huggingface import write_huggingface
        from bert_keras.checkpoints.names import encoder_weights
        write_huggingface({**encoder_weights(encoder), **heads}, args.hf_out, config, vocab_file=vocab,
                          lower_case=lower)
        print(f"wrote Hugging Face folder {args.hf_out}" + (" with the cls/ heads" if heads else ""))


def _task_model_source(source: str):
    """The task model `convert --checkpoint` names (our .keras file or finetune --out folder, a Hugging Face task
    folder, or a fine-tuned classifier's TF checkpoint), or None for an encoder checkpoint."""
    from bert_keras.checkpoints.load import has_classifier_head
    from bert_keras.tasks import load_task_model
    from bert_keras.tasks.huggingface import is_huggingface_task_folder
    ours = source.endswith(".keras") or (os.path.exists(os.path.join(source, "model.keras"))
                                         and not os.path.exists(os.path.join(source, "zoo.json")))
    try:
        if not (ours or is_huggingface_task_folder(source) or has_classifier_head(source)):
            return None
        return load_task_model(source)
    except (FileNotFoundError, TypeError, ValueError) as e:
        raise CommandError(str(e)) from None


def _convert_task_model(model, args) -> None:
    """convert of a task model: --out its .keras (with its preprocessor), --hf-out a Hugging Face task folder."""
    from bert_keras.atomic import atomic_file
    from bert_keras.checkpoints.huggingface_tasks import BY_TASK_CLASS
    from bert_keras.tasks import save_huggingface
    if args.google_out:
        raise CommandError(f"--google-out writes encoder checkpoints; {args.checkpoint} is a fine-tuned "
                           f"{type(model).__name__}: write it with --out model.keras or --hf-out DIR")
    config = model.encoder.config
    labels = getattr(model, "label_names", None)
    print(f"read {args.checkpoint}: {type(model).__name__}" + (f" ({', '.join(labels)})" if labels else "")
          + f", {config.num_hidden_layers} layers, hidden {config.hidden_size}")
    if args.out:
        with atomic_file(args.out) as tmp:
            model.save(tmp)
        print(f"wrote {args.out} (the task model with its preprocessor: takes raw text; "
              f"bert-keras export --model {args.out})")
    if args.hf_out:
        save_huggingface(model, args.hf_out)
        architecture = BY_TASK_CLASS[type(model).__name__].architecture
        print(f"wrote Hugging Face folder {args.hf_out} ({architecture} with its tokenizer: "
              f"AutoModelFor{architecture.removeprefix('BertFor')} and transformers' pipelines load it)")


def _checkpoint_vocabulary(checkpoint: str):
    """(vocab, lower_case) beside a checkpoint (vocab.txt, else tokenizer.json), (None, None) when it has none."""
    from bert_keras.preprocessing.folder_vocab import MissingVocabularyError, folder_vocabulary
    try:
        return folder_vocabulary(checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint) or ".")
    except MissingVocabularyError:
        return None, None
    except ValueError as e:
        raise CommandError(str(e)) from None


def _minilm_folder() -> str:
    from bert_keras.loading import bundled_minilm_folder
    try:
        return bundled_minilm_folder()
    except RuntimeError as e:
        raise CommandError(str(e)) from None


def cmd_demo(args) -> None:
    from bert_keras_cli.demo import run_demo
    output_folder(args.out, "--out")
    _minilm_folder()
    try:
        run_demo(args.out, args.sentences, epochs=args.epochs, progress=not args.quiet)
    except FileExistsError as e:
        raise CommandError(str(e)) from None


DEMO_SENTENCES = [
    "The cat sits outside.",
    "A man is playing guitar.",
    "The new movie is awesome.",
    "A kitten is sitting outdoors.",
    "Someone strums a guitar on stage.",
    "The film was brilliant and fun.",
]


def cmd_embed(args) -> None:
    import numpy as np

    from bert_keras_cli.text_args import check_utf8_text
    for i, sentence in enumerate(args.sentences or []):          # before the model loads
        check_utf8_text(sentence, f"sentence {i + 1}")

    from bert_keras.checkpoints.sentence_transformers import is_sentence_transformers_folder
    from bert_keras.tasks import BertEmbedder
    from bert_keras_cli.model_flags import load_model_flags
    source = args.model or _minilm_folder()
    if is_sentence_transformers_folder(source):       # its pooling, Dense, Normalize, prompts and max_seq_length
        from bert_keras.tasks import load_task_model
        try:
            model = load_task_model(source)
        except (FileNotFoundError, TypeError, ValueError) as e:
            raise CommandError(str(e)) from None
    else:
        model = _task_model_source(source)
    if model is None:                        # an encoder checkpoint: mean pooling, as SentenceTransformer(name) does
        _, encoder, preprocessor = load_model_flags(args)
        model = BertEmbedder(encoder, pooling="mean", preprocessor=preprocessor)
        print(f"{source} has no sentence-transformers modules.json: mean pooling, not normalized (what "
              "sentence-transformers builds for a plain checkpoint)")
    elif args.vocab or args.cased is not None:
        raise CommandError(f"--vocab and --cased apply to an encoder checkpoint; {source} brings its own tokenizer: "
                           "leave them out")
    if not isinstance(model, BertEmbedder):
        raise CommandError(f"{source} is a {type(model).__name__}, not a sentence embedder: give a "
                           "sentence-transformers folder, a BertEmbedder .keras or an encoder checkpoint")
    if args.prompt_name is not None and args.prompt_name not in model.prompts:
        raise CommandError(f"--prompt-name {args.prompt_name}: the model's prompts are "
                           f"{', '.join(model.prompts) or 'none'}")
    sentences = args.sentences or DEMO_SENTENCES
    config, task = model.encoder.config, model._task_args
    embeddings = model.encode(sentences, prompt_name=args.prompt_name)
    prompt = model.resolve_prompt(args.prompt_name)
    ids = model.preprocessor([prompt + sentences[0]])
    name = args.model or "all-MiniLM-L6-v2"
    print(f"{name}: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
          f"{model.encoder.count_params():,} parameters, loaded from {source}")
    print(f"pooling {'+'.join(task['pooling'])}" + "".join(f", dense {d['units']}" for d in task["dense"])
          + (", normalized" if task["normalize"] else "") + f", max_seq_length {model.preprocessor.max_seq_length}"
          + (f", prompt {prompt!r}" if prompt else ""))
    length = int(np.asarray(ids["input_mask"])[0].sum())
    print(f"token ids of {sentences[0]!r}: {np.asarray(ids['input_word_ids'])[0][:length].tolist()}")
    print(f"embedding of {sentences[0]!r}: [{', '.join(f'{v:.4f}' for v in embeddings[0][:6])}, ...] "
          f"({embeddings.shape[1]} values)")
    if len(sentences) < 2:
        return
    similarity = model.similarity(embeddings, embeddings)
    print(f"\nmost similar sentence ({model.similarity_fn_name}):")
    for i, sentence in enumerate(sentences):
        j = max((k for k in range(len(sentences)) if k != i), key=lambda k: similarity[i, k])
        print(f"  {sentence:<36} -> {sentences[j]:<36} {similarity[i, j]:.3f}")


def cmd_vocab(args) -> None:
    from bert_keras.preprocessing import build_vocab
    missing = [f for f in args.files if not os.path.exists(f)]
    if missing:
        raise CommandError(f"no such file: {', '.join(missing)}")
    output_file(args.out, "--out", ".txt", required=False)
    try:
        tokens = build_vocab(args.files, vocab_size=args.size, lower_case=not args.cased, out=args.out)
    except (OSError, ValueError) as e:                  # not UTF-8 (file, line, byte offset), no words
        raise CommandError(str(e)) from None
    short = (f", {args.size - len(tokens):,} fewer than --size {args.size:,} (the nearest TF.Text's learner "
             "reaches on this corpus: fewer pieces recur in less text; a model built on it takes its vocab_size from "
             "the file)"
             if len(tokens) < args.size else "")
    print(f"wrote {args.out}: {len(tokens):,} tokens ({'cased' if args.cased else 'uncased'}){short}")


def cmd_zoo_list(args) -> None:
    from bert_keras.zoo import load_catalogue
    print(f"{'name':<32} {'layers':>6} {'hidden':>6} {'heads':>5} {'parameters':>12}  cased")
    for e in load_catalogue().values():
        cased = "n/a" if e.cased is None else ("yes" if e.cased else "no")
        print(f"{e.name:<32} {e.layers:>6} {e.hidden:>6} {e.heads:>5} {e.params:>12,}  {cased}")


def cmd_zoo_get(args) -> None:
    from bert_keras.zoo import ZooError, get
    try:
        folder = get(args.name, progress=not args.quiet)
    except (ZooError, FileNotFoundError, ValueError) as e:      # a checkpoint folder that cannot be read
        raise CommandError(str(e)) from None
    print(f"{args.name}: {os.path.join(folder, 'model.keras')} (vocab: {os.path.join(folder, 'vocab.txt')})")


def finetune_config(args):
    """The FinetuneConfig of the command line; with --from-record, the recorded run's (--out and --quiet from
    this command)."""
    from bert_keras.finetune import FinetuneConfig
    if args.from_record:
        from bert_keras.training.record import config_from_record
        try:
            config = config_from_record(args.from_record, FinetuneConfig, out=args.out, progress=not args.quiet)
        except (OSError, ValueError, TypeError) as e:
            raise CommandError(f"--from-record {args.from_record}: {e}") from None
        print(f"repeating the run recorded in {args.from_record} (its settings, seed {config.seed}; other flags "
              f"than --out and --quiet are not read)", flush=True)
        return config
    if not args.task:
        raise CommandError("--task is required (or --from-record a run's metrics.json)")
    task_args = {k: getattr(args, k) for k in ("doc_stride", "max_query_length", "max_answer_length",
                                                "null_score_diff_threshold", "loss", "pooling", "mini_batch_size")
                 if getattr(args, k) is not None}
    model = args.model or _minilm_folder()
    return FinetuneConfig(
        task=args.task, model=model, out=args.out, train=args.train, eval=args.eval, data=args.data,
        vocab=args.vocab, lower_case=lower_case(args), epochs=args.epochs,
        batch_size=args.batch_size, learning_rate=args.learning_rate, warmup_proportion=args.warmup_proportion,
        schedule=args.schedule, weight_decay=args.weight_decay, adam_epsilon=args.adam_epsilon,
        seq_length=args.seq_length, max_seq_length=args.max_seq_length or (384 if "squad" in args.task else 128),
        pack=args.pack,
        max_train_examples=args.max_train_examples, max_eval_examples=args.max_eval_examples,
        mixed_precision=args.mixed_precision, jit_compile=args.jit_compile,
        steps_per_execution=args.steps_per_execution, strategy=args.strategy, tpu=args.tpu, seed=args.seed,
        backend=args.backend,
        task_args=task_args, progress=not args.quiet, log_every=args.log_every, save_every=args.save_every)


def cmd_finetune(args) -> None:
    from bert_keras.data import DataFormatError
    from bert_keras.finetune import finetune
    config = finetune_config(args)
    try:
        result = finetune(config, overwrite=args.overwrite)
    except (OSError, ValueError, RuntimeError, DataFormatError) as e:      # OSError: FileNotFoundError, ...
        raise CommandError(str(e)) from None
    if result["history"]:
        print(f"final: {json.dumps(result['metrics'])}")
    else:
        print("final: no evaluation set, so no metric (pass --eval FILE, or --data DIR holding the task's "
              "dev file)")
    print(f"wrote {os.path.join(result['out'], 'model.keras')} (the task model; takes raw text), metrics.json "
          f"(scores, timings, and the settings: --from-record repeats the run), training_curves.png, TensorBoard "
          f"logs in {os.path.join(result['out'], 'logs')}")


def _start_worker_server() -> None:
    """Starts the server the local back end forks its workers from when a path is on gs:// (with local paths
    the workers fork from this process: bert_keras.pretraining.local._context, the same preload) before this
    process imports TensorFlow, so the two imports run side by side, not one after the other. The server exits
    with this process if no pool uses it."""
    import multiprocessing
    if "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver
        multiprocessing.get_context("forkserver").set_forkserver_preload(["bert_keras.pretraining.local"])
        forkserver.ensure_running()


def cmd_pretraining_data(args) -> None:
    import atexit
    import gc
    # The process's exit skips the interpreter's last garbage collection, over every TensorFlow and Keras object
    # (2.2-2.5 s of each run on the loaded 2-core host): what the command writes is closed by then.
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    if not args.runner and args.workers != 1 and any("://" in p for p in (args.out, *args.inputs)):
        _start_worker_server()
    from concurrent.futures.process import BrokenProcessPool

    from bert_keras.preprocessing import BertPreprocessor
    from bert_keras.pretraining import MaskingConfig, create_pretraining_data
    from bert_keras import storage
    if not storage.exists(args.vocab):
        raise CommandError(f"no such file: {args.vocab}")
    args.vocab = storage.local_copy(args.vocab)            # a vocab.txt on a bucket
    config = MaskingConfig(max_seq_length=args.max_seq_length, max_predictions_per_seq=args.max_predictions_per_seq,
                           masked_lm_prob=args.masked_lm_prob, short_seq_prob=args.short_seq_prob,
                           dupe_factor=args.dupe_factor, whole_word_mask=args.whole_word_mask)
    try:
        pre = BertPreprocessor(args.vocab, **({} if args.cased is None else {"lower_case": not args.cased}))
        if args.runner:
            from bert_keras.pretraining.beam import run_beam
            result = run_beam(args.inputs, pre, args.out, args.shards, config, args.seed, bucket_mb=args.bucket_mb,
                              runner=args.runner, pipeline_args=args.pipeline_args, pack=args.pack)
        else:
            result = create_pretraining_data(args.inputs, pre, args.out, args.shards, config, args.seed,
                                             progress=not args.quiet, workers=args.workers, bucket_mb=args.bucket_mb,
                                             pack=args.pack)
    except (FileNotFoundError, ValueError, ImportError) as e:
        raise CommandError(str(e)) from None
    except BrokenProcessPool as e:                     # a worker killed: the finished units are kept
        raise CommandError(str(e)) from None
    resumed = result.get("resumed", {})
    if any(resumed.values()):
        print("resumed a stopped run: " + ", ".join(f"{resumed[k]} of {result['units'][k]} {k}" for k in resumed)
              + " were done")
    if result["documents"] is None:                    # a Beam runner without metrics
        print(f"wrote {len(result['files'])} file(s): {', '.join(result['files'])}")
    else:
        packed = f" packed into {result['records']:,} rows" if args.pack else ""
        print(f"{result['documents']:,} documents, {result['sentences']:,} sentences -> {result['instances']:,} "
              f"instances{packed} in {len(result['files'])} file(s): {', '.join(result['files'])}")


def cmd_pretrain(args) -> None:
    from bert_keras.pretraining import PretrainConfig, pretrain
    config = PretrainConfig(
        model=args.model or "bert_base", out=args.out, records=args.records, text=args.text, pack=args.pack,
        vocab=args.vocab,
        lower_case=lower_case(args), max_seq_length=args.max_seq_length,        # None: the records' own, or 128
        max_predictions_per_seq=args.max_predictions_per_seq, nsp=not args.no_nsp and not args.text,
        train_steps=args.train_steps, save_every=args.save_every, batch_size=args.batch_size,
        learning_rate=args.learning_rate, warmup_steps=args.warmup_steps, optimizer=args.optimizer,
        schedule=args.schedule, weight_decay=args.weight_decay, adam_epsilon=args.adam_epsilon,
        mixed_precision=args.mixed_precision, jit_compile=args.jit_compile,
        steps_per_execution=args.steps_per_execution, strategy=args.strategy, tpu=args.tpu, seed=args.seed,
        backend=args.backend,
        progress=not args.quiet, log_every=args.log_every)
    try:
        result = pretrain(config, overwrite=args.overwrite)
    except (OSError, ValueError, RuntimeError) as e:                       # OSError: FileNotFoundError, ...
        raise CommandError(str(e)) from None
    last = result["history"][-1] if result["history"] else {}
    print(f"strategy: {args.strategy}, replicas: {result['replicas']}")
    print(f"step {result['step']}: {json.dumps({k: round(v, 4) for k, v in last.items()})}")
    print(f"wrote {os.path.join(args.out, 'encoder.keras')} (for finetune --model), pretrainer.keras, "
          f"tf1_checkpoint/ (with the cls/ heads), training_curves.png, logs/")


def cmd_export(args) -> None:
    from bert_keras.tasks import load_task_model
    from savedmodels.export import export_for_serving
    if getattr(args, "format", "savedmodel") == "litert":
        return cmd_export_litert(args)
    if not args.base_path or not args.name:
        raise CommandError("export needs --base-path and --name (or --format litert --out FILE.tflite)")
    output_folder(args.base_path, "--base-path")
    if args.precision not in PRECISIONS:
        raise CommandError(f"a SavedModel takes --precision {', '.join(PRECISIONS)}, not {args.precision} (that is "
                           "--format litert's)")
    warmup_cap = getattr(args, "xla_warmup_max_length", None)
    if warmup_cap is not None and not args.xla:
        raise CommandError("--xla-warmup-max-length applies to the XLA export: add --xla")
    try:
        model = load_task_model(args.model)
        xla = args.xla
        if warmup_cap is not None:
            from savedmodels.xla import XlaShapes
            xla = XlaShapes.for_model(model, warmup_max_length=warmup_cap)
        written = export_for_serving(model, args.base_path, args.name, args.version, args.precision, xla=xla)
    except (FileNotFoundError, FileExistsError, TypeError, ValueError) as e:
        raise CommandError(str(e)) from None
    if written.removed:
        print(f"removed {len(written.removed)} temporary file(s) or folder(s) a stopped export left "
              f"({sum(size for _, size in written.removed) / 1e6:.1f} MB): "
              f"{', '.join(path for path, _ in written.removed)}")
    print(f"wrote {written.version} (SavedModel, {type(model).__name__} signatures; the op check passed for stock "
          f"TF Serving >= 2.12)")
    print(f"wrote {written.keras_file} (for keras.models.load_model)")
    print(f"wrote {written.models_config} (models: {', '.join(written.model_names)}) and "
          f"{written.batching_parameters} (server-side batching" +
          (")" if written.batchable else f"; off: {', '.join(written.unbatchable)} may not be batched)"))
    print(f"serve: {written.serve_command()}")


def cmd_export_litert(args) -> None:
    from bert_keras.tasks import load_task_model
    if not args.out:
        raise CommandError("--format litert needs --out FILE.tflite")
    output_file(args.out, "--out", ".tflite", required=False)
    if args.precision not in LITERT_PRECISIONS:
        raise CommandError(f"--format litert takes --precision {', '.join(LITERT_PRECISIONS)}, not {args.precision}")
    from savedmodels.litert import export_litert
    try:
        model = load_task_model(args.model)
        path = export_litert(model, args.out, args.precision)
    except (FileNotFoundError, TypeError, ValueError) as e:
        raise CommandError(str(e)) from None
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB, LiteRT {args.precision}, {type(model).__name__}: "
          f"raw text in; LiteRT builtins + TF.Text's TFLite kernels, no Flex)")
    print("run: savedmodels.litert_runner.LiteRTModel(path) (pip install 'bert-keras[litert]'); docs/litert.md")


def cmd_export_hub(args) -> None:
    from bert_keras.loading import load_backbone
    from bert_keras.source_config import check_max_seq_length
    from savedmodels.hub import export_hub_style
    output_folder(args.out, "--out")
    try:
        check_max_seq_length(args.model or _minilm_folder(), args.seq_length, "--seq-length")
        encoder, preprocessor = load_backbone(args.model or _minilm_folder(), args.vocab,
                                              lower_case(args))
        paths = export_hub_style(encoder, preprocessor, args.out, args.seq_length)
    except (FileNotFoundError, FileExistsError, ValueError) as e:
        raise CommandError(str(e)) from None
    print(f"wrote {paths['preprocessor']} (TF Hub preprocessor API: __call__ at seq_length {args.seq_length}, "
          "tokenize -> [batch, words, pieces], bert_pack_inputs(segments, seq_length=N) for any N)")
    print(f"wrote {paths['encoder']} (TF Hub Reusable SavedModel: __call__(inputs, training), variables)")


def cmd_serve(args) -> None:
    import logging

    from savedmodels.batching import BatchingParameters
    from savedmodels.errors import PortInUse
    from savedmodels.local_server import start_server
    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port {args.port} is not a port: give 1-65535 (0: any free one)")
    # The server's own lines (loads, swaps, refusals), not every library's INFO (TensorFlow's "Restoring parameters").
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logging.getLogger("savedmodels").addHandler(handler)
    logging.getLogger("savedmodels").setLevel(logging.INFO)
    models = dict(m.split("=", 1) if "=" in m else (os.path.basename(m.rstrip("/")), m) for m in args.models)
    try:
        batching = None
        if args.enable_batching:
            batching = (BatchingParameters.read(args.batching_parameters_file) if args.batching_parameters_file
                        else BatchingParameters())
        server, port = start_server(models, port=args.port, batching=batching,
                                    xla_cpu_compilation_enabled=args.xla_cpu_compilation_enabled)
    except PortInUse as e:
        raise CommandError(f"--port {e.port} {e.why}: stop it or give another --port") from None
    except (FileNotFoundError, RuntimeError, ValueError) as e:
        raise CommandError(str(e)) from None
    server.wait_for_signal(lambda: print(                       # until Ctrl-C or SIGTERM
        f"serving {', '.join(models)} on 127.0.0.1:{port} (TF Serving's gRPC protocol and load path, the newest "
        "version of each base path; a test server, not for production)", flush=True))


def cmd_predict(args) -> None:
    import grpc
    import numpy as np
    import tensorflow as tf

    from savedmodels.client import ServingClient
    from savedmodels.request_inputs import RequestError, as_array, fit_inputs, translate_error
    values = {}
    for item in args.input or []:
        if "=" not in item or not item.split("=", 1)[0]:
            raise CommandError(f"--input {item!r}: write NAME=TEXT (e.g. --input text='a fine film')")
        name, value = item.split("=", 1)
        values.setdefault(name, []).append(value)
    if args.inputs_json is not None:
        try:
            text = args.inputs_json
            if text.startswith("@"):
                with open(text[1:], encoding="utf-8") as f:
                    text = f.read()
            values = json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise CommandError(f"--inputs-json: {e}") from None
        if not isinstance(values, dict) or not values:
            raise CommandError('--inputs-json: give a JSON object of inputs, e.g. \'{"context": ["A man sits."], '
                               '"endings": [["He plays.", "He eats."]]}\'')
    try:                                       # text a command line passes that is not UTF-8: before any RPC
        for flag, text in (("--server", args.server), ("--model-name", args.model_name),
                           ("--signature", args.signature or "")):
            as_array(flag, text, tf.string)
        for name, texts in values.items() if args.input else ():
            as_array(name, texts, tf.string)
    except RequestError as e:
        raise CommandError(str(e)) from None
    signature = args.signature or ("classify" if args.classify else "serving_default")
    where = f"(server {args.server}, model {args.model_name})"
    client = ServingClient(args.server, args.model_name, timeout=args.timeout)
    sent, signature_def = {}, None
    try:
        signature_defs = client.metadata()
        signature_def = signature_defs.get(signature)
        if signature_def is None:
            raise CommandError(f"model {args.model_name} has no signature {signature}: give --signature "
                               f"{' or '.join(sorted(signature_defs))}")
        if args.classify:          # Classify: one tf.Example a row, a feature a name
            sent = {name: np.atleast_1d(as_array(name, value, tf.string)) for name, value in values.items()}
            rows = {name: a.shape for name, a in sent.items()}
            if len(set(rows.values())) > 1 or any(len(shape) > 1 for shape in rows.values()):
                raise CommandError("--classify sends one tf.Example a row, a text of each input in each: give each "
                                   "input the same number of texts (got "
                                   f"{', '.join(f'{n} {list(shape)}' for n, shape in rows.items())})")
            examples = [{name: a[i] for name, a in sent.items()} for i in range(len(next(iter(sent.values()))))]
            for example, classes in zip(examples, client.classify(examples, signature=signature)):
                print(json.dumps({"input": {k: v.decode("utf-8") for k, v in example.items()},
                                  "classes": {c: round(score, 4) for c, score in classes}}, ensure_ascii=False))
            return
        sent = fit_inputs(values, signature_def, signature)
        out = client.predict(sent, signature=signature)
    except RequestError as e:
        hint = "" if args.inputs_json is not None else " (--inputs-json '{\"NAME\": [...]}' takes any shape)"
        raise CommandError(f"{e}{hint}") from None
    except grpc.RpcError as e:
        details = e.details() or ""
        if e.code() == grpc.StatusCode.INVALID_ARGUMENT:
            details = translate_error(details, signature, sent, signature_def)
        raise CommandError(f"{e.code().name}: {details} {where}") from None
    finally:
        client.close()
    print(json.dumps({k: (np.char.decode(v.astype(bytes), "utf-8", "replace") if v.dtype == object else v).tolist()
                      for k, v in out.items()}, ensure_ascii=False))


def _flag_value(text: str) -> bool:
    """A TF Serving style boolean flag value: --flag, --flag=true, --flag=false."""
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_training_flags(p, learning_rate: float, schedule: str, lengths: str, progress: str) -> None:
    """Flags shared by finetune and pretrain (their defaults: learning rate and schedule; their help on
    --max-seq-length and --quiet)."""
    p.add_argument("--out", required=True, help="output folder (resumes there if a run was interrupted; a "
                   "finished run there is refused unless --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh in --out even if a run finished (or stopped) there: its files are deleted")
    p.add_argument("--batch-size", type=positive_int, default=32, help="global batch size (default 32)")
    p.add_argument("--learning-rate", type=positive_float, default=learning_rate,
                   help=f"peak learning rate (default {learning_rate:g})")
    p.add_argument("--schedule", choices=["google", "linear"], default=schedule,
                   help="decay after warm-up: google (google-research/bert, peak * (1 - step/total)) or linear "
                        f"(transformers' get_linear_schedule_with_warmup, from the peak) (default {schedule})")
    p.add_argument("--weight-decay", type=non_negative_float, default=0.01,
                   help="AdamW's decoupled weight decay, not on LayerNorm or biases (default 0.01)")
    p.add_argument("--adam-epsilon", type=positive_float, default=1e-6, help="Adam's epsilon (default 1e-6)")
    p.add_argument("--max-seq-length", type=positive_int, help=f"longest sequence ({lengths})")
    p.add_argument("--mixed-precision", choices=["mixed_bfloat16", "mixed_float16"],
                   help="Keras mixed-precision policy (mixed_bfloat16 on TPU)")
    p.add_argument("--jit-compile", action="store_true", help="compile the train step with XLA")
    p.add_argument("--steps-per-execution", type=positive_int, default=1, help="steps per TPU call (default 1)")
    p.add_argument("--strategy", default="auto", choices=["auto", "tpu", "mirrored", "multi_worker", "cpu"],
                   help="auto: a TPU when one is signalled, else several GPUs, else one device; on the JAX backend "
                        "data parallel over every JAX device (a TPU's cores); tpu; cpu (one device); mirrored and "
                        "multi_worker: TensorFlow only")
    p.add_argument("--backend", choices=["tensorflow", "jax"],
                   help="Keras backend to train on (default: $KERAS_BACKEND, else tensorflow; jax is the route "
                        "for today's Colab and Kaggle TPUs). The model file loads on either")
    p.add_argument("--tpu", help="Cloud TPU name or grpc://host:8470 (default: $TPU_NAME, else this TPU VM's TPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help=f"{progress} instead of a progress bar")
    p.add_argument("--log-every", type=positive_int, default=10,
                   help="TensorBoard gets the loss and the learning rate every N steps (default 10)")


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line (the problem, then where the usage is), exit status 2,
    as every other error of the command; subcommand parsers are of the same class (add_subparsers' default), and
    an error in a subcommand's arguments is that subcommand's (`bert-keras pretrain: error: unrecognized
    arguments: 0`): `_Subcommands` notes the innermost subcommand's parser."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Subcommands)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")


class _Subcommands(argparse._SubParsersAction):
    """add_subparsers' action, noting the parser of the subcommand named (`_command_parser`; a nested one's last)
    and making an error in its arguments its own, on every Python (3.12+ pass them up to the top parser)."""

    def __call__(self, parser, namespace, values, option_string=None):
        chosen = self._name_parser_map.get(values[0])
        if chosen is not None:
            setattr(namespace, "_command_parser", chosen)
        try:
            super().__call__(parser, namespace, values, option_string)
        except argparse.ArgumentError as e:
            (chosen or parser).error(str(e))


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="bert-keras", description="BERT for Keras 3 and TensorFlow.")
    parser.add_argument("--version", action=VersionAction,
                        help="print the versions of bert-keras, TensorFlow and Keras, and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("demo", help="fine-tune real MiniLM weights on a shipped SST-2 sample, export, serve over "
                                    "gRPC and classify sentences (1-3 minutes)")
    p.add_argument("sentences", nargs="*", help="sentences to classify (default: four built-in reviews)")
    p.add_argument("--out", help="run folder (default: bert_keras_demo/run-<time>; must be new or empty)")
    p.add_argument("--epochs", type=positive_float, default=1.0, help="epochs over the 1,000 sample phrases (default 1)")
    p.add_argument("--quiet", action="store_true", help="one line per epoch instead of a progress bar")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("embed", help="sentence embeddings and nearest neighbours (default model: the real "
                                     "all-MiniLM-L6-v2)")
    p.add_argument("sentences", nargs="*", help="sentences to embed (default: a built-in set)")
    add_model_flags(p, "a sentence-transformers folder (its pooling, Dense, Normalize, prompts and max_seq_length), "
                    "a BertEmbedder .keras, or an encoder checkpoint, zoo name or preset (mean pooling); default: "
                    "the real all-MiniLM-L6-v2 folder")
    p.add_argument("--prompt-name", help="a prompt of the model's (e.g. query, passage) to prepend, as "
                   "SentenceTransformer.encode(prompt_name=...); default: the model's default prompt, if any")
    p.set_defaults(func=cmd_embed)
    fill_mask.add_parser(sub)

    p = sub.add_parser("presets", help="list the model sizes with their parameter counts")
    p.set_defaults(func=cmd_presets)

    p = sub.add_parser("convert", help="convert a google-research, Model Garden or Hugging Face checkpoint, or a "
                                       "fine-tuned task model to or from Hugging Face")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder or TF checkpoint prefix; a Hugging Face "
                   "task folder (BertForSequenceClassification, ...TokenClassification, ...QuestionAnswering, "
                   "...MultipleChoice); or a task model (.keras file or finetune --out folder)")
    p.add_argument("--out", help="write the encoder (or the task model, with its preprocessor) as a .keras file")
    p.add_argument("--google-out", help="write a google-research TF1 checkpoint folder (with the cls/ heads it has)")
    p.add_argument("--hf-out", help="write a Hugging Face folder (safetensors; a task model's BertFor... class; "
                   "BertForMaskedLM/BertForPreTraining "
                   "when the checkpoint has the heads)")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("vocab", help="build a WordPiece vocab.txt from text files (TF.Text's BERT vocab tool)")
    p.add_argument("files", nargs="+", help="text files, one sentence or paragraph per line")
    p.add_argument("--out", required=True, help="the vocab.txt to write")
    p.add_argument("--size", type=positive_int, default=30522, help="target vocabulary size (default 30522)")
    p.add_argument("--cased", action="store_true", help="keep case and accents (default: uncased)")
    p.set_defaults(func=cmd_vocab)

    p = sub.add_parser("finetune", help="fine-tune on GLUE, SQuAD, multiple choice or CoNLL data",
                       description="Tasks: cola sst-2 mrpc qqp mnli qnli rte wnli sts-b (GLUE TSVs); squad, squad_v2 "
                                   "(SQuAD JSON); swag (csv), openbookqa, arc, commonsenseqa (jsonl); conll2003; "
                                   "embedding ((anchor, positive[, negative]) rows or scored pairs: JSONL, TSV with "
                                   "a header, STS-B csv); rerank (scored or 0/1 pairs).")
    p.add_argument("--task", help="task name (see above); required unless --from-record")
    p.add_argument("--from-record", metavar="METRICS_JSON",
                   help="repeat a run: every setting from its metrics.json (give a new --out)")
    add_model_flags(p, "checkpoint folder/prefix, zoo name, .keras file or preset name "
                       "(default: the real all-MiniLM-L6-v2 weights)")
    p.add_argument("--data", help="folder in the task's standard layout (e.g. GLUE's train.tsv/dev.tsv)")
    p.add_argument("--train", help="training file (overrides --data)")
    p.add_argument("--eval", help="evaluation file (overrides --data)")
    add_training_flags(p, learning_rate=3e-5, schedule="linear",         # docs/accuracy.md: schedules
                       lengths="default 128; 384 for SQuAD", progress="one line per epoch")
    p.add_argument("--epochs", type=positive_float, default=3, help="epochs (default 3; fractions allowed)")
    p.add_argument("--warmup-proportion", type=fraction, default=0.1, help="linear warmup share (default 0.1)")
    p.add_argument("--seq-length", type=positive_int, help="fixed sequence length (TPUs); default: pad per batch")
    p.add_argument("--pack", type=positive_int, nargs="?", const=8, default=0, metavar="K",
                   help="sentence classification/regression and token tagging with --seq-length: train on rows of "
                        "up to K examples (default 8), not one a row (static shapes without the padding; "
                        "--batch-size stays examples)")
    p.add_argument("--max-train-examples", type=positive_int, help="use only the first N training examples")
    p.add_argument("--max-eval-examples", type=positive_int, help="use only the first N evaluation examples")
    p.add_argument("--doc-stride", type=positive_int, help="SQuAD: window stride in tokens (default 128)")
    p.add_argument("--max-query-length", type=positive_int, help="SQuAD: question tokens kept (default 64)")
    p.add_argument("--max-answer-length", type=positive_int, help="SQuAD: longest answer in tokens (default 30)")
    p.add_argument("--null-score-diff-threshold", type=float, help="SQuAD 2.0: no-answer threshold (default 0)")
    p.add_argument("--loss", choices=["mnrl", "cached-mnrl", "cosent", "cosine"],
                   help="embedding: MultipleNegativesRankingLoss (default for (anchor, positive[, negative]) rows), "
                        "its cached GradCache variant, CoSENT (default for scored pairs) or CosineSimilarityLoss")
    p.add_argument("--pooling", choices=["mean", "cls", "max", "mean_sqrt_len_tokens", "weightedmean"],
                   help="embedding: the pooling of a new embedder (default mean; a sentence-transformers folder "
                        "keeps its own modules)")
    p.add_argument("--mini-batch-size", type=positive_int,
                   help="embedding, --loss cached-mnrl: rows embedded at a time (default 32)")
    p.add_argument("--save-every", type=positive_int,
                   help="a resume point every N steps (a kill loses at most N; default: every 10 minutes), and after "
                        "every epoch: rerun the same command to resume at the last one")
    p.set_defaults(func=cmd_finetune)

    p = sub.add_parser("pretraining-data", help="text files -> pretraining TFRecords (google-research's format)",
                       description="Input: one sentence per line, a blank line between documents. Output: "
                                   "OUT-0000i-of-0000n.tfrecord shards with google-research's features.")
    p.add_argument("inputs", nargs="+", help="text files")
    p.add_argument("--out", required=True, help="output prefix, e.g. data/wiki (shards: data/wiki-00000-of-00004...)")
    p.add_argument("--vocab", required=True, help="vocab.txt")
    p.add_argument("--cased", action="store_true", default=None, help="keep case (default: from the vocabulary)")
    p.add_argument("--shards", type=positive_int, default=1)
    p.add_argument("--max-seq-length", type=positive_int, default=128)
    p.add_argument("--max-predictions-per-seq", type=positive_int, default=20)
    p.add_argument("--masked-lm-prob", type=fraction, default=0.15)
    p.add_argument("--short-seq-prob", type=fraction, default=0.1)
    p.add_argument("--dupe-factor", type=positive_int, default=10, help="passes over the data with different masks")
    p.add_argument("--whole-word-mask", action="store_true")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--workers", type=positive_int, help="local processes (default: one per core this process may use)")
    p.add_argument("--bucket-mb", type=positive_float, default=64,
                   help="text per bucket in MB (memory per worker follows it; random next sentences come from the "
                        "same bucket; the bytes written depend on it)")
    p.add_argument("--runner", help="run on Apache Beam instead (pip install bert-keras[beam]): DirectRunner, "
                                    "DataflowRunner, FlinkRunner, SparkRunner...; any further flags are Beam "
                                    "pipeline options (e.g. --direct_num_workers 2, --project, --temp_location)")
    p.add_argument("--pack", action="store_true",
                   help="write packed rows: up to 3 whole instances a row, little padding; `pretrain --records` "
                        "trains on them with attention within each sequence (docs/pretraining.md)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_pretraining_data)

    p = sub.add_parser("pretrain", help="pretrain with masked LM (+ next sentence) from records or raw text")
    add_model_flags(p, "preset name (from scratch; needs --vocab), checkpoint folder or .keras file")
    p.add_argument("--records", help="pretraining TFRecords: comma-separated globs or folders")
    p.add_argument("--text", help="or: text files (comma-separated) for dynamic masking, MLM only")
    p.add_argument("--pack", action="store_true",
                   help="with --text: pack the masked lines into rows of up to 3 sequences on the fly (attention "
                        "within each sequence; --batch-size is rows a step). Packed records need no flag")
    add_training_flags(p, learning_rate=1e-4, schedule="google",         # google-research's pretraining
                       lengths="default 128; with --records, the records' own: pretraining-data --max-seq-length",
                       progress="one line per --save-every steps")
    p.add_argument("--max-predictions-per-seq", type=positive_int,
                   help="masked positions a sequence (default 20; with --records, the records' own)")
    p.add_argument("--no-nsp", action="store_true", help="masked LM only (records' NSP labels ignored)")
    p.add_argument("--train-steps", type=positive_int, default=1000)
    p.add_argument("--save-every", type=positive_int, default=100, help="checkpoint interval in steps (default 100)")
    p.add_argument("--warmup-steps", type=non_negative_int,
                   help="linear warm-up steps (default 100; a tenth of --train-steps when that is below 100)")
    p.add_argument("--optimizer", choices=["adamw", "lamb"], default="adamw", help="lamb for large batches")
    p.set_defaults(func=cmd_pretrain)

    p = sub.add_parser("export", help="write a fine-tuned model as a TF Serving SavedModel (raw-text signatures)")
    p.add_argument("--model", required=True, help="the fine-tuned model.keras (or the `bert-keras finetune --out` "
                   "folder holding it), a Hugging Face task folder, or a sentence-transformers folder (an embedder: "
                   "text -> embedding, a signature per prompt; a CrossEncoder: text_a, text_b -> score)")
    p.add_argument("--base-path", help="TF Serving model base folder (holds <name>/<version>/)")
    p.add_argument("--name", help="model name in TF Serving")
    p.add_argument("--version", type=positive_int, help="version number (default: the next free one)")
    p.add_argument("--format", choices=["savedmodel", "litert"], default="savedmodel",
                   help="litert: one .tflite taking raw text (--out), run by LiteRTModel (docs/litert.md)")
    p.add_argument("--out", help="--format litert: the .tflite file to write")
    p.add_argument("--precision", choices=sorted(set(PRECISIONS) | set(LITERT_PRECISIONS)), default="fp32",
                   metavar="PRECISION",
                   help=f"SavedModel: {', '.join(PRECISIONS)} (bf16: bfloat16 weights and matmuls, for AVX512_BF16/"
                        "AMX CPUs; int8: int8 weights, dynamic activation quantization, a quarter of the bytes but "
                        "slower than fp32 on TensorFlow's CPU kernels; same signatures and op check). --format "
                        f"litert: {', '.join(LITERT_PRECISIONS)} (fp16: float16 weights). Default fp32")
    p.add_argument("--xla", action="store_true",
                   help="encoder + head in one XLA-compiled function on padded shapes (length buckets 16/32/64/128/"
                        "max, batch sizes 1-32), warm-up for each; serve with --xla_cpu_compilation_enabled=true "
                        "(docs/xla-serving.md)")
    p.add_argument("--xla-warmup-max-length", type=positive_int, metavar="N",
                   help="--xla: warm up the length buckets up to N only (e.g. 128 for sentences on a model packing "
                        "up to 512: a faster load); longer buckets compile on their first request (default: all)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("export-hub", help="write an encoder as TF Hub-style preprocessor + encoder SavedModels")
    add_model_flags(p, "checkpoint folder, zoo name, .keras file or preset (default: all-MiniLM-L6-v2)")
    p.add_argument("--out", required=True, help="folder for preprocessor/ and encoder/")
    p.add_argument("--seq-length", type=positive_int, default=128, help="the preprocessor's fixed length (default 128)")
    p.set_defaults(func=cmd_export_hub)

    p = sub.add_parser("serve", help="serve exports over TF Serving's gRPC protocol (in-process test server)")
    p.add_argument("models", nargs="+", help="NAME=BASE_PATH or BASE_PATH (name: its folder name)")
    p.add_argument("--port", type=int, default=8500)
    p.add_argument("--enable_batching", "--enable-batching", action="store_true",
                   help="batch concurrent requests server-side, as tensorflow_model_server --enable_batching")
    p.add_argument("--batching_parameters_file", "--batching-parameters-file",
                   help="TF Serving's BatchingParameters text proto (bert-keras export writes one beside "
                        "models.config)")
    p.add_argument("--xla_cpu_compilation_enabled", "--xla-cpu-compilation-enabled", nargs="?", const=True,
                   default=False, type=_flag_value, metavar="true|false",
                   help="serve XLA exports (bert-keras export --xla), as tensorflow_model_server "
                        "--xla_cpu_compilation_enabled=true; without it they are refused")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("predict", help="send raw text to a TF Serving model over gRPC")
    p.add_argument("--server", required=True, help="host:port of TF Serving's gRPC endpoint (e.g. localhost:8500)")
    p.add_argument("--model-name", required=True)
    inputs = p.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--input", action="append",
                        help="NAME=TEXT, repeatable: --input text='a fine film' (pairs: text_a=... text_b=...; a name "
                             "given N times is a batch of N, or for a [batch, choices] input such as multiple "
                             "choice's endings, one example's N choices)")
    inputs.add_argument("--inputs-json", metavar="JSON",
                        help="the inputs as a JSON object of nested lists, any signature's shapes and dtypes (or "
                             "@FILE): '{\"context\": [\"A man sits.\"], \"endings\": [[\"He plays.\", \"He eats."
                             "\"]]}'")
    p.add_argument("--signature", help="the signature to run (default: serving_default; with --classify, classify)")
    p.add_argument("--classify", action="store_true",
                   help="use the Classify API (one tf.Example a row, a feature each input name) instead of Predict")
    p.add_argument("--timeout", type=positive_float, default=30.0)
    p.set_defaults(func=cmd_predict)

    attention.add_parser(sub)
    inside.add_parser(sub)
    zoo = sub.add_parser("zoo", help="the released google-research checkpoints by name").add_subparsers(
        dest="zoo_command", required=True, metavar="ZOO_COMMAND")
    p = zoo.add_parser("list", help="the catalogue: name, layers, hidden, heads, parameters, casing")
    p.set_defaults(func=cmd_zoo_list, command="zoo list")    # main()'s error line names the subcommand
    p = zoo.add_parser("get", help="download, verify, convert and cache a checkpoint (name, archive or folder)")
    p.add_argument("name")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_zoo_get, command="zoo get")      # `bert-keras zoo get: error: ...`
    return parser


def parse_command_line(argv=None) -> argparse.Namespace:
    """The parsed flags; flags the parser does not know pass to Beam (`args.pipeline_args`) with --runner only."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    command_parser = vars(args).pop("_command_parser", parser)   # the subcommand's: its name in the error
    if extra and not getattr(args, "runner", None):          # only --runner takes Beam's own pipeline options
        command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.pipeline_args = extra
    return args


def _check_backend(wanted: str | None) -> None:
    """`--backend` must be the backend Keras runs (set before Keras loads: by this package's __init__ for the
    command, by KERAS_BACKEND for a process that calls main() itself)."""
    import bert_keras  # noqa: F401  (before Keras: its backend route picks JAX on a TPU VM without tensorflow-tpu)
    import keras
    if wanted and wanted != keras.backend.backend():
        raise CommandError(f"--backend {wanted}, but Keras already runs on {keras.backend.backend()} in this "
                           f"process: run `KERAS_BACKEND={wanted} bert-keras ...` or the bert-keras command itself")
    if keras.backend.backend() == "jax":
        import importlib.util
        if importlib.util.find_spec("jax") is None:
            raise CommandError("the JAX backend needs JAX: pip install jax (on a TPU VM: pip install 'jax[tpu]')")


def main(argv=None) -> int:
    args = parse_command_line(argv)
    from bert_keras_cli.absl_logs import quiet_tensorflow_logs
    quiet_tensorflow_logs()                           # before any command loads TensorFlow
    try:
        if hasattr(args, "backend"):                  # the training commands
            _check_backend(args.backend)
        args.func(args)
    except CommandError as e:
        print(f"bert-keras {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:          # output piped into `head`
        sys.stderr.close()
    except KeyboardInterrupt:        # Ctrl-C: one line, not a traceback (a training run resumes when rerun)
        print(f"\nbert-keras {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
