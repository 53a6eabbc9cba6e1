"""Looking inside BERT from the command line: `bert-keras features` and `bert-keras probe`.

    bert-keras features [--model M] --layers CHOICE --words first|mean --out OUT.npz FILE
    bert-keras probe --task conll2003 --label pos|chunk|ner --out DIR [--model M] [--train-sentences N] [--data DIR]

`features` reads FILE (one text a line, UTF-8) and writes OUT.npz: `features` float32 [words of all texts, width]
(or [words, n, H] for the weighted sums: the stack a learned scalar mix reads), `text_index` and `word_index` int32
per row (the line, 0-based, and the word's position in it), `words` (the word strings), `start` and `end` int64
(the word's bytes in its line's UTF-8), `num_words` int32 per line, and `layers`, `words_mode` (the choices).
Long lines: words past the model's length are dropped, counted per line in `num_words` vs the rows, and reported.
`probe` writes DIR/probe.json and DIR/probe.png (bert_keras.probes).
"""

from __future__ import annotations

from bert_keras_cli.errors import CommandError
from bert_keras_cli.flag_types import non_negative_float, positive_int
from bert_keras_cli.model_flags import add_model_flags, load_model_flags

MODEL_HELP = ("checkpoint folder, zoo name, .keras file or preset (default: the real all-MiniLM-L6-v2 weights)")


def cmd_features(args) -> None:
    import os
    import warnings

    import numpy as np

    from bert_keras.atomic import atomic_file
    from bert_keras.features import word_features
    if not os.path.isfile(args.file):
        raise CommandError(f"no such file: {args.file} (give a text file, one text a line)")
    layers = args.layers
    try:
        layers = int(layers)
    except ValueError:
        if layers not in LAYER_CHOICES:
            raise CommandError(f"--layers {layers!r} is not a choice: use one of {', '.join(LAYER_CHOICES)}, or a "
                               f"hidden state index (0 = embeddings, -1 = last layer)") from None
    if not args.out.endswith(".npz"):
        raise CommandError(f"--out {args.out}: name an .npz file (numpy.savez adds .npz otherwise)")
    from bert_keras.data.text_files import open_text
    try:
        with open_text(args.file) as f:               # UTF-8: a bad byte is named (line, byte offset)
            texts = [line.rstrip("\r\n") for line in f]
    except ValueError as e:
        raise CommandError(str(e)) from None
    if not texts:
        raise CommandError(f"{args.file} is empty: write one text a line")
    source, encoder, preprocessor = load_model_flags(args, max_seq_length=args.max_seq_length)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = word_features(encoder, preprocessor, texts, layers=layers, words=args.words,
                                batch_size=args.batch_size)
        except ValueError as e:
            raise CommandError(str(e)) from None
    with atomic_file(args.out) as tmp:
        np.savez(tmp, features=out.features, text_index=out.text_index, word_index=out.word_index,
                 words=np.array(out.words, dtype=str), start=out.start, end=out.end, num_words=out.num_words,
                 layers=np.array(str(args.layers)), hidden_states=np.array(out.hidden_states, np.int32),
                 words_mode=np.array(args.words))
    print(f"{len(texts)} texts, {len(out.words)} words; features {out.features.dtype} {list(out.features.shape)} "
          f"from hidden states {out.hidden_states} (0 = embeddings) of {source}")
    for warning in caught:
        print(f"warning: {warning.message}")
    if args.layers.startswith("weighted"):
        print("the weighted sums are stacks [words, n, H]: put bert_keras.features.ScalarMix first in the model "
              "that reads them, to learn the mix")
    print(f"wrote {args.out} (features, text_index, word_index, words, start, end, num_words)")


def cmd_probe(args) -> None:
    import os

    from bert_keras.atomic import atomic_directory, write_json
    from bert_keras.probes import default_conll_dir, plot_probe, probe_conll2003
    if args.task != "conll2003":
        raise CommandError(f"--task {args.task}: only conll2003 is probed")
    data = args.data or default_conll_dir()
    if not all(os.path.exists(os.path.join(data, f"{s}.txt")) for s in ("train", "valid")):
        raise CommandError(f"no CoNLL-2003 train.txt and valid.txt in {data}: pass --data DIR holding them (or set "
                           "BERT_KERAS_SHARED_DATA to the folder holding conll2003/)")
    for flag in ("train_sentences", "test_sentences", "valid_sentences", "epochs"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise CommandError(f"--{flag.replace('_', '-')} must be at least 1, got {value}")
    source, encoder, preprocessor = load_model_flags(args, max_seq_length=args.max_seq_length)
    try:
        result = probe_conll2003(encoder, preprocessor, args.label, data_dir=data,
                                 train_sentences=args.train_sentences, valid_sentences=args.valid_sentences,
                                 test_sentences=args.test_sentences, l2=args.l2, epochs=args.epochs, seed=args.seed,
                                 progress=None if args.quiet else (lambda m: print(m, flush=True)))
    except (FileNotFoundError, ValueError) as e:
        raise CommandError(str(e)) from None
    result["settings"]["model"] = ("all-MiniLM-L6-v2" if not args.model else
                                   os.path.basename(os.path.normpath(source)) if os.path.exists(source) else source)
    result["settings"]["model_source"] = source
    with atomic_directory(args.out) as tmp:
        write_json(os.path.join(tmp, "probe.json"), result)
        plot_probe(result, os.path.join(tmp, "probe.png"))
    f1 = "valid_f1" in result["layers"][0]
    print(f"{'hidden state':<12} {'valid acc':>9} {'test acc':>9}" + (f" {'valid F1':>9} {'test F1':>9}" if f1 else ""))
    for e in result["layers"]:
        print(f"{e['name']:<12} {100 * e['valid_accuracy']:>9.2f} {100 * e['test_accuracy']:>9.2f}"
              + (f" {100 * e['valid_f1']:>9.2f} {100 * e['test_f1']:>9.2f}" if f1 else ""))
    print(f"wrote {os.path.join(args.out, 'probe.json')} and probe.png ({result['seconds']:.0f} s)")


def _model_flags(p) -> None:
    add_model_flags(p, MODEL_HELP)
    p.add_argument("--max-seq-length", type=positive_int,
                   help="word pieces kept per text, [CLS] and [SEP] included (default 512, or the model's "
                        "max_position_embeddings when fewer); words past it are dropped and reported")


# The library's choices (bert_keras.features, bert_keras.probes; tests/test_features.py checks they agree), spelled
# here so that building the parser (`bert-keras --help`) does not load TensorFlow.
LAYER_CHOICES = ("embeddings", "last", "second_to_last", "sum_last_four", "concat_last_four", "sum_all",
                 "weighted_sum_last_four", "weighted_sum_all")
WORD_CHOICES = ("first", "mean")
PROBE_LABELS = ("pos", "chunk", "ner")


def add_parser(sub) -> None:
    """Adds `features` and `probe` to the subcommands `sub`."""
    p = sub.add_parser("features", help="word-level contextual features from chosen layers (BERT's feature-based "
                                        "approach), as an .npz",
                       description="Each word of each line of FILE gets a vector from the chosen hidden states "
                                   "(the BERT paper's Table 7): its first word piece's or the mean of its pieces. "
                                   "Writes features [words, width] with text_index, word_index, words, start, end "
                                   "(bytes). Hidden state 0 is the embedding output, i is layer i.")
    p.add_argument("file", help="text file, one text a line (UTF-8)")
    _model_flags(p)
    p.add_argument("--layers", default="second_to_last",
                   help=f"{', '.join(LAYER_CHOICES)}, or a hidden state index (0 = embeddings, -1 = last) "
                        "(default second_to_last)")
    p.add_argument("--words", choices=WORD_CHOICES, default="first",
                   help="first: the word's first piece (the paper); mean: the mean of its pieces (default first)")
    p.add_argument("--out", required=True, help="the .npz to write")
    p.add_argument("--batch-size", type=positive_int, default=32, help="texts per encoder call (default 32)")
    p.set_defaults(func=cmd_features)

    p = sub.add_parser("probe", help="linear probes of every layer for a CoNLL-2003 column (pos, chunk, ner)",
                       description="Trains a linear softmax classifier on each hidden state's frozen first-piece "
                                   "word features (embeddings, layer 1..L): train on train.txt's first N "
                                   "sentences, score on valid.txt and on train.txt's last sentences (held out). "
                                   "Writes DIR/probe.json and DIR/probe.png.")
    p.add_argument("--task", default="conll2003", choices=["conll2003"], help="the data set (conll2003)")
    p.add_argument("--label", required=True, choices=PROBE_LABELS, help="the CoNLL column to predict")
    p.add_argument("--out", required=True, help="output folder (replaced): probe.json, probe.png")
    _model_flags(p)
    p.add_argument("--data", help="folder holding CoNLL-2003's train.txt and valid.txt (default: "
                                  "$BERT_KERAS_SHARED_DATA/conll2003, else ../shared/data/conll2003)")
    p.add_argument("--train-sentences", type=positive_int, default=2000,
                   help="train on train.txt's first N sentences (default 2000)")
    p.add_argument("--valid-sentences", type=positive_int, default=1000,
                   help="score on valid.txt's first N sentences (default 1000)")
    p.add_argument("--test-sentences", type=positive_int, default=1000,
                   help="score on train.txt's last N sentences, held out (default 1000)")
    p.add_argument("--l2", type=non_negative_float, default=1e-3, help="the probes' L2 weight (default 1e-3)")
    p.add_argument("--epochs", type=positive_int, default=20,
                   help="the probes' passes over the training words (default 20)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_probe)
