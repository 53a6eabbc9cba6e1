"""Looking inside BERT: one text's attention probabilities, every layer and head, and pictures of them.

    attentions, tokens = attention_maps(encoder, preprocessor, "the movie was great")   # [L, N, P, P], P pieces
    draw_heads(attentions, tokens, layer=0, path="layer0.png")      # one layer's heads, word pieces on both axes
    draw_overview(attentions, tokens, path="all.png")               # every layer x head, small

A map's row is a query piece, its columns the key pieces it attends to: row i of head h in layer l is the softmax
that weighs the values for piece i (after the softmax, before dropout: what `encoder(inputs, attention_maps=True)`
returns, docs/attention.md). The pictures are drawn with matplotlib's Agg canvas on a `Figure` of their own (no
pyplot: a notebook's backend and open figures are left alone) and written atomically.
"""

from __future__ import annotations

import math

import numpy as np

from bert_keras.atomic import atomic_file


def attention_maps(encoder, preprocessor, text: str):
    """The attention probabilities of every layer and head of `encoder` on one text, padding removed.

    Args:
        encoder: BertEncoder.
        preprocessor: BertPreprocessor with the encoder's vocabulary (its length rules apply: a text longer than
            `max_seq_length` pieces is truncated).
        text: str. One text (a sentence or a paragraph).

    Returns:
        (attentions, tokens): float32 array [L, N, P, P] (layer, head, query piece, key piece; each row sums to
        1) and the P word pieces, [CLS] first and [SEP] last, as the vocabulary spells them ("##" marks a piece
        that continues a word).

    Raises:
        ValueError: the text is empty or has no word pieces.

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> preprocessor = bert_keras.BertPreprocessor("vocab.txt")
        >>> attentions, tokens = bert_keras.attention.attention_maps(encoder, preprocessor, "The movie was great!")
        >>> attentions.shape, tokens
        ((2, 2, 7, 7), ['[CLS]', 'the', 'movie', 'was', 'great', '!', '[SEP]'])
        >>> bool(np.allclose(attentions.sum(-1), 1, atol=1e-5))
        True
    """
    import keras
    if not isinstance(text, str) or not text.strip():
        raise ValueError("no text: give a sentence or more")
    inputs = {k: np.asarray(v) for k, v in preprocessor([text]).items()}
    length = int(inputs["input_mask"][0].sum())                 # one text: its real pieces come first
    if length <= 2:
        raise ValueError(f"{text!r} has no word pieces in this vocabulary")
    maps = encoder(inputs, attention_maps=True)["attention_maps"]
    attentions = np.stack([keras.ops.convert_to_numpy(m)[0, :, :length, :length] for m in maps]).astype("float32")
    tokens = [preprocessor.vocab[i] for i in inputs["input_word_ids"][0, :length]]
    return attentions, tokens


def draw_heads(attentions, tokens, layer: int, path: str) -> str:
    """One layer's heads as a grid of heatmaps (query pieces down, key pieces across), written as a PNG.

    Args:
        attentions: [L, N, P, P] from `attention_maps`.
        tokens: the P word pieces (the axes' labels).
        layer: int. The layer, 0-based (attentions[layer]); negative counts from the last.
        path: the PNG to write (atomically).

    Returns:
        path.

    Raises:
        IndexError: no such layer.

    Example:
        >>> attentions = np.full((2, 4, 3, 3), 1 / 3, "float32")
        >>> bert_keras.attention.draw_heads(attentions, ["[CLS]", "hi", "[SEP]"], 1, "heads.png")
        'heads.png'
    """
    attentions = np.asarray(attentions)
    layers, heads, pieces = attentions.shape[:3]
    if not -layers <= layer < layers:
        raise IndexError(f"layer {layer}: the model has layers 0 to {layers - 1}")
    columns = math.ceil(math.sqrt(heads))
    rows = math.ceil(heads / columns)
    panel = min(max(2.5, 0.16 * pieces + 1.2), 8.0)                       # inches: room for the labels
    fig = _figure(columns * panel, rows * panel + 0.6)
    axes = fig.subplots(rows, columns, squeeze=False)
    font = max(3.0, min(8.0, 160 / pieces))
    for h, ax in enumerate(axes.flat):
        if h >= heads:
            ax.axis("off")
            continue
        image = ax.imshow(attentions[layer, h], vmin=0, vmax=1, cmap="viridis", interpolation="nearest")
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xticks(range(pieces), tokens, rotation=90, fontsize=font)
        ax.set_yticks(range(pieces), tokens, fontsize=font)
    fig.suptitle(f"layer {layer % layers} of {layers} (0-based): rows are queries, columns the keys they weigh")
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="attention probability")
    return _save(fig, path)


def draw_overview(attentions, tokens, path: str) -> str:
    """Every layer (rows) and head (columns) as small heatmaps, no labels but the layer and head numbers.

    Args:
        attentions: [L, N, P, P] from `attention_maps`.
        tokens: the P word pieces (named in the title when few).
        path: the PNG to write (atomically).

    Returns:
        path.

    Example:
        >>> attentions = np.full((2, 4, 3, 3), 1 / 3, "float32")
        >>> bert_keras.attention.draw_overview(attentions, ["[CLS]", "hi", "[SEP]"], "overview.png")
        'overview.png'
    """
    attentions = np.asarray(attentions)
    layers, heads, pieces = attentions.shape[:3]
    fig = _figure(1.1 * heads + 0.8, 1.1 * layers + 0.9)
    axes = fig.subplots(layers, heads, squeeze=False)
    for (l, h), ax in np.ndenumerate(axes):
        ax.imshow(attentions[l, h], vmin=0, vmax=1, cmap="viridis", interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        if l == 0:
            ax.set_title(f"head {h}", fontsize=8)
        if h == 0:
            ax.set_ylabel(f"layer {l}", fontsize=8)
    text = " ".join(tokens) if len(tokens) <= 24 else f"{len(tokens)} word pieces"
    fig.suptitle(f"attention, layers x heads (0-based): {text}", fontsize=9)
    return _save(fig, path)


def _figure(width: float, height: float):
    from matplotlib.figure import Figure                  # the Agg canvas, no pyplot state
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig, path: str) -> str:
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png")
    return path
