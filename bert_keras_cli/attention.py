"""`bert-keras attention`: one text's attention maps, every layer and head, as an .npz and optionally a picture.

    bert-keras attention --model M --npz OUT.npz [--out PICTURE.png] [--layer K] TEXT

The .npz holds `attentions` (float32 [layers, heads, pieces, pieces], [CLS] and [SEP] included, no padding) and
`tokens` (the word pieces, a string array). The picture is layer K's heads with the pieces on both axes, or without
--layer every layer x head small (bert_keras.attention; docs/attention.md).
"""

from __future__ import annotations

from bert_keras_cli.errors import CommandError
from bert_keras_cli.model_flags import add_model_flags, load_model_flags
from bert_keras_cli.output_paths import output_file
from bert_keras_cli.text_args import check_utf8_text


def cmd_attention(args) -> None:
    """`bert-keras attention`: the maps as an npz, and a picture."""
    import numpy as np

    from bert_keras.atomic import atomic_file
    from bert_keras.attention import attention_maps, draw_heads, draw_overview
    text = " ".join(args.text)
    if not text.strip():
        raise CommandError("no text: give the sentence to look at, e.g. bert-keras attention --npz a.npz "
                           "'the cat sat on the mat'")
    check_utf8_text(text, "the text")
    for flag, path in (("--npz", args.npz), ("--out", args.out)):      # the paths are printed when written
        if path:
            check_utf8_text(path, flag)
    output_file(args.npz, "--npz", ".npz")
    _, encoder, preprocessor = load_model_flags(args)
    try:
        attentions, tokens = attention_maps(encoder, preprocessor, text)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        raise CommandError(str(e)) from None
    layers, heads = attentions.shape[:2]
    if args.layer is not None and not 0 <= args.layer < layers:
        raise CommandError(f"--layer {args.layer}: this model's layers are 0 to {layers - 1}")
    with atomic_file(args.npz) as tmp:
        np.savez(tmp, attentions=attentions, tokens=np.array(tokens, dtype=str))
    print(f"{layers} layers x {heads} heads over {len(tokens)} word pieces: {' '.join(tokens)}")
    print(f"wrote {args.npz} (attentions float32 {list(attentions.shape)}: layer, head, query, key; tokens)")
    if args.out:
        if args.layer is None:
            draw_overview(attentions, tokens, args.out)
            print(f"wrote {args.out} (every layer x head; --layer K draws one layer's heads with the word pieces)")
        else:
            draw_heads(attentions, tokens, args.layer, args.out)
            print(f"wrote {args.out} (layer {args.layer}'s {heads} heads: rows are queries, columns keys)")


def add_parser(sub) -> None:
    """Adds `attention` to the subcommands `sub`."""
    p = sub.add_parser("attention", help="one text's attention maps, every layer and head (an .npz and a picture)",
                       description="Writes the attention probabilities (after the softmax) of every layer and "
                                   "head on one text: --npz holds attentions [layers, heads, pieces, pieces] and "
                                   "tokens; --out draws them (docs/attention.md).")
    p.add_argument("text", nargs="+", help="the text (several words are joined with spaces)")
    add_model_flags(p, "checkpoint folder, zoo name, .keras file or preset (default: the real all-MiniLM-L6-v2 "
                       "weights)")
    p.add_argument("--npz", required=True, help="the .npz to write: attentions and tokens")
    p.add_argument("--out", help="a PNG to draw: every layer x head, or with --layer one layer's heads")
    p.add_argument("--layer", type=int, metavar="K",
                   help="draw layer K's heads with the word pieces on both axes (0-based: 0 is the first layer, "
                        "attentions[K] in the .npz)")
    p.set_defaults(func=cmd_attention)
