"""Layer probes: how much of a word-level property each layer of a frozen BERT makes linearly readable.

One linear softmax classifier per hidden state (0 = the embedding output, 1..L = each block's output) on the frozen
first-piece word features (`bert_keras.features.word_features(..., words="first")`), for a CoNLL-2003 column:
part of speech (`pos`, 45 Penn Treebank tags), syntactic chunk (`chunk`, IOB2 chunk tags) or named entity (`ner`,
IOB2 entity tags). The probe is softmax regression: the features are standardised with the training slice's mean
and standard deviation (a fixed, non-trained `keras.layers.Normalization`), then one Dense layer with L2 `l2` on
its kernel (not the bias), trained with Keras (Adam, mini-batches, cosine decay to 0) to minimise

    mean cross-entropy + l2 * ||W||^2,

the objective of scikit-learn's `LogisticRegression(C=1 / (2 * l2 * N))` (N training words) on the same
standardised features; tests/test_probes.py checks the accuracy is within 0.5 point of it.

Data split (CoNLL-2003 as shared here has train.txt and valid.txt, no test file): the probe trains on the first
`train_sentences` sentences of train.txt; "valid" is valid.txt (CoNLL's development set, the first
`valid_sentences` of it); "test" is the last `test_sentences` sentences of train.txt, other documents than the
training slice (the two must not overlap). Nothing is tuned on either: the L2, the schedule and the step count are
fixed, so both are plain held-out scores. Scores: word accuracy on both, and for `chunk` and `ner` the span F1
(conlleval / seqeval's default mode, `bert_keras.metrics`). Words without a WordPiece (none in CoNLL-2003) get no
prediction and count as wrong (tagged "O" for F1).
"""

from __future__ import annotations

import os

import keras
import numpy as np

PROBE_LABELS = ("pos", "chunk", "ner")
_COLUMN = {"pos": "pos_tags", "chunk": "chunk_tags", "ner": "tags"}


def default_conll_dir() -> str:
    """The CoNLL-2003 folder: $BERT_KERAS_SHARED_DATA/conll2003, else ../shared/data/conll2003 beside the checkout
    (as the tests and tools find shared data).

    Example:
        >>> os.path.basename(bert_keras.probes.default_conll_dir())
        'conll2003'
    """
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shared = os.environ.get("BERT_KERAS_SHARED_DATA", os.path.join(os.path.dirname(repo), "shared", "data"))
    return os.path.join(shared, "conll2003")


def train_probe(features, labels, num_classes: int, *, l2: float = 1e-3, epochs: int = 20, batch_size: int = 256,
                learning_rate: float = 0.03, min_steps: int = 1000, seed: int = 0) -> keras.Model:
    """A linear softmax probe on frozen features, trained with Keras.

    Standardisation (the training features' mean and standard deviation, fixed) then Dense(num_classes) with
    L2 `l2` on the kernel; Adam on shuffled mini-batches, the learning rate decaying to 0 (cosine) over `epochs`
    (more when that is fewer than `min_steps` steps: small data sets need them to converge).
    The objective is mean cross-entropy + l2 * ||W||^2: scikit-learn's LogisticRegression with C = 1 / (2 l2 N).

    Args:
        features: float array [N, H]. One row per training word.
        labels: int array [N], in 0..num_classes - 1.
        num_classes: int. K.
        l2: float. The L2 weight on the kernel (not the bias).
        epochs: int. Passes over the data.
        batch_size: int. Words per step.
        learning_rate: float. Adam's peak rate.
        min_steps: int. The least number of steps: epochs are added until there are this many.
        seed: int. Initialisation and shuffling.

    Returns:
        keras.Model: [N, H] float32 -> logits [N, K].

    Example:
        >>> x = np.random.default_rng(0).normal(size=[200, 8]).astype("float32")
        >>> y = (x[:, 0] > 0).astype("int32")
        >>> probe = bert_keras.probes.train_probe(x, y, 2, epochs=5)
        >>> float((np.argmax(probe.predict(x, verbose=0), -1) == y).mean()) > 0.9
        True
    """
    import tensorflow as tf

    features = np.asarray(features, np.float32)
    labels = np.asarray(labels, np.int32)
    keras.utils.set_random_seed(seed)
    mean = features.mean(0)
    std = features.std(0)
    std = np.where(std > 0, std, 1.0)
    model = keras.Sequential([
        keras.Input(shape=(features.shape[1],)),
        keras.layers.Normalization(mean=mean, variance=std ** 2, name="standardise"),
        keras.layers.Dense(num_classes, kernel_regularizer=keras.regularizers.L2(l2), kernel_initializer="zeros",
                           name="logits")], name="probe")
    per_epoch = max(1, -(-len(features) // batch_size))
    epochs = max(epochs, -(-min_steps // per_epoch))
    steps = epochs * per_epoch
    model.compile(optimizer=keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(learning_rate, steps)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = (tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(len(features), seed=seed)
            .batch(batch_size).prefetch(2))
    model.fit(data, epochs=epochs, verbose=0, shuffle=False)            # the dataset shuffles
    return model


def sklearn_c(l2: float, num_examples: int) -> float:
    """scikit-learn LogisticRegression's C for the same objective as `train_probe`'s `l2` on N examples.

    sklearn minimises 0.5 ||W||^2 + C * sum of cross-entropies; divided by C N that is mean cross-entropy +
    ||W||^2 / (2 C N), so C = 1 / (2 l2 N).

    Args:
        l2: float. `train_probe`'s L2 weight.
        num_examples: int. N, the training words.

    Returns:
        float: C.

    Example:
        >>> bert_keras.probes.sklearn_c(1e-3, 500)
        1.0
    """
    return 1.0 / (2.0 * l2 * num_examples)


def probe_conll2003(encoder, preprocessor, label: str = "pos", *, data_dir: str | None = None,
                    train_sentences: int = 2000, valid_sentences: int | None = 1000, test_sentences: int = 1000,
                    l2: float = 1e-3, epochs: int = 20, batch_size: int = 32, seed: int = 0,
                    progress=None) -> dict:
    """Probes every hidden state of the encoder for a CoNLL-2003 column (see the module docstring for the split).

    Args:
        encoder: BertEncoder. Frozen.
        preprocessor: BertPreprocessor matching it.
        label: str. "pos", "chunk" or "ner".
        data_dir: str or None. A folder with CoNLL-2003's train.txt and valid.txt; None: `default_conll_dir()`.
        train_sentences: int. The first N sentences of train.txt train the probes.
        valid_sentences: int or None. The first M sentences of valid.txt score them (None: all 3,250).
        test_sentences: int. The last T sentences of train.txt score them too (held out: must not overlap).
        l2: float. The probes' L2 weight (`train_probe`).
        epochs: int. The probes' passes over the training words.
        batch_size: int. Sentences per encoder call.
        seed: int. The probes' initialisation and shuffling.
        progress: callable(str) or None. Told of each step (e.g. `print`).

    Returns:
        dict: "layers" (a list, one entry per hidden state: "layer" 0..L, "name", "valid_accuracy",
        "test_accuracy", "train_accuracy", and "valid_f1"/"test_f1" for chunk and ner), "settings" (the arguments,
        the split, word counts, the classes) and "seconds".

    Raises:
        ValueError: an unknown label, or train and test slices that overlap.
        FileNotFoundError: no train.txt / valid.txt in data_dir.

    Example:
        >>> result = bert_keras.probes.probe_conll2003(encoder, preprocessor, "pos")    # doctest: +SKIP
        >>> [round(layer["valid_accuracy"], 3) for layer in result["layers"]]             # doctest: +SKIP
        [0.843, 0.92, 0.934, 0.937, 0.935, 0.93, 0.915]
    """
    import time

    from bert_keras.data.conll import read_conll2003
    from bert_keras.features import word_features
    from bert_keras.metrics.tagging import f1_score

    if label not in PROBE_LABELS:
        raise ValueError(f"unknown probe label {label!r}: choose one of {', '.join(PROBE_LABELS)}")
    say = progress or (lambda message: None)
    began = time.perf_counter()
    data_dir = data_dir or default_conll_dir()
    paths = {split: os.path.join(data_dir, f"{split}.txt") for split in ("train", "valid")}
    for path in paths.values():
        if not os.path.exists(path):
            raise FileNotFoundError(f"no {path}: give a folder holding CoNLL-2003's train.txt and valid.txt")
    train_all = read_conll2003(paths["train"], labels=None)
    if train_sentences + test_sentences > len(train_all):
        raise ValueError(f"train.txt has {len(train_all)} sentences: {train_sentences} for training and the last "
                         f"{test_sentences} for test overlap; lower --train-sentences or test_sentences")
    splits = {"train": train_all[:train_sentences],
              "valid": read_conll2003(paths["valid"], labels=None)[:valid_sentences],
              "test": train_all[len(train_all) - test_sentences:]}
    column = _COLUMN[label]
    classes = sorted({tag for s in splits["train"] for tag in getattr(s, column)})
    index = {tag: i for i, tag in enumerate(classes)}
    num_states = encoder.config.num_hidden_layers + 1
    data = {}
    for split, sentences in splits.items():
        say(f"features of {len(sentences)} {split} sentences ({num_states} hidden states)")
        out = word_features(encoder, preprocessor, [list(s.tokens) for s in sentences],
                            layers=list(range(num_states)), words="first", batch_size=batch_size)
        tags = [getattr(s, column) for s in sentences]
        gold = np.array([index.get(tags[t][w], -1) for t, w in zip(out.text_index, out.word_index)], np.int32)
        data[split] = (out, gold, tags)
    train_out, train_gold, _ = data["train"]
    known = train_gold >= 0
    layers = []
    for layer in range(num_states):
        probe = train_probe(train_out.features[known, layer], train_gold[known], len(classes), l2=l2, epochs=epochs,
                            seed=seed)
        entry = {"layer": layer, "name": "embeddings" if layer == 0 else f"layer {layer}"}
        for split, (out, gold, tags) in data.items():
            predicted = np.argmax(probe.predict(out.features[:, layer], batch_size=4096, verbose=0), axis=-1)
            total = sum(len(t) for t in tags)                   # words without a piece count as wrong
            entry[f"{split}_accuracy"] = float((predicted == gold).sum() / max(total, 1))
            if label in ("chunk", "ner") and split != "train":
                predicted_tags = [["O"] * len(t) for t in tags]
                for t, w, p in zip(out.text_index, out.word_index, predicted):
                    predicted_tags[t][w] = classes[p]
                entry[f"{split}_f1"] = float(f1_score([list(t) for t in tags], predicted_tags))
        scores = (f"{k} {v:.4f}" for k, v in entry.items() if k.endswith(("accuracy", "f1")))
        say(f"{entry['name']}: " + ", ".join(scores))
        layers.append(entry)
    settings = {"task": "conll2003", "label": label, "data_dir": os.path.abspath(data_dir),
                "train": f"train.txt sentences 0..{train_sentences - 1}",
                "valid": f"valid.txt sentences 0..{len(splits['valid']) - 1}",
                "test": f"train.txt sentences {len(train_all) - test_sentences}..{len(train_all) - 1}",
                "train_sentences": train_sentences, "valid_sentences": len(splits["valid"]),
                "test_sentences": test_sentences,
                "words": {split: int(sum(len(t) for t in data[split][2])) for split in data},
                "features": "first WordPiece of each CoNLL word (each word tokenized alone), frozen encoder",
                "probe": "standardised features, linear softmax (Keras Dense), Adam, cosine decay, mean "
                         "cross-entropy + l2 * ||W||^2",
                "l2": l2, "epochs": epochs, "seed": seed, "num_classes": len(classes), "classes": classes}
    return {"layers": layers, "settings": settings, "seconds": round(time.perf_counter() - began, 1)}


def plot_probe(result: dict, path: str) -> None:
    """Draws accuracy (and span F1, when present) against the hidden state, valid and test, as a PNG.

    Args:
        result: dict. What `probe_conll2003` returns.
        path: str. The PNG to write (written atomically).

    Example:
        >>> result = {"layers": [{"layer": i, "valid_accuracy": a, "test_accuracy": a} for i, a in
        ...                      enumerate([0.8, 0.9])], "settings": {"label": "pos", "model": "x"}}
        >>> bert_keras.probes.plot_probe(result, "probe.png"); os.path.exists("probe.png")
        True
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bert_keras.atomic import atomic_file

    layers = [e["layer"] for e in result["layers"]]
    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=90)
    for key, style in (("valid_accuracy", "o-"), ("test_accuracy", "s--"), ("valid_f1", "o:"), ("test_f1", "s:")):
        if key in result["layers"][0]:
            ax.plot(layers, [100 * e[key] for e in result["layers"]], style, label=key.replace("_", " "))
    ax.set_xticks(layers)
    ax.set_xticklabels(["emb"] + [str(i) for i in layers[1:]])
    ax.set_xlabel("hidden state (emb = embedding output, i = layer i)")
    ax.set_ylabel("%")
    settings = result["settings"]
    ax.set_title(f"CoNLL-2003 {settings['label']} probe: {settings.get('model', '')}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
