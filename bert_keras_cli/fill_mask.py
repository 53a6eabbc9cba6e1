"""`bert-keras fill-mask`: the top-k tokens at each literal [MASK] of raw texts (BertMaskedLM.fill_mask)."""

from __future__ import annotations

import json

from bert_keras_cli.errors import CommandError
from bert_keras_cli.flag_types import positive_int
from bert_keras_cli.output_paths import output_file
from bert_keras_cli.model_flags import add_model_flags, lower_case
from bert_keras_cli.text_args import check_utf8_text

MODEL_HELP = ("a model with BERT's masked-LM head: a google-research checkpoint, a Hugging Face BertForMaskedLM or "
              "BertForPreTraining folder, a `bert-keras pretrain --out` folder, a saved BertMaskedLM (.keras), a "
              "zoo name, or a preset (random weights, with --vocab)")


def cmd_fill_mask(args) -> None:
    from bert_keras.atomic import atomic_file
    from bert_keras.tasks import load_masked_lm
    if not args.texts:
        raise CommandError('give one or more texts holding [MASK], e.g. "The capital of France is [MASK]."')
    for number, text in enumerate(args.texts, 1):
        check_utf8_text(text, f"text {number}")
    output_file(args.save, "--save", ".keras")
    try:
        model = load_masked_lm(args.model, vocab=args.vocab, lower_case=lower_case(args), top_k=args.top_k)
        results = model.fill_mask(args.texts, top_k=args.top_k)
    except (FileNotFoundError, ValueError) as e:
        raise CommandError(str(e)) from None
    if args.save:
        with atomic_file(args.save) as tmp:
            model.save(tmp)
    if args.json:
        print(json.dumps([[[{k: a[k] for k in ("token", "id", "probability")} for a in mask] for mask in text]
                          for text in results]))
    else:
        for text, masks in zip(args.texts, results):
            print(text)
            for m, answers in enumerate(masks, 1):
                best = ", ".join(f"{a['token']} {a['probability']:.3f}" for a in answers)
                print(f"  [MASK] {m}: {best}")
            print(f"  -> {masks[0][0]['sequence']}")
    if args.save:
        print(f"wrote {args.save} (bert-keras export --model {args.save} serves it)")


def add_parser(sub) -> None:
    """Registers `fill-mask` on the CLI's subparsers."""
    p = sub.add_parser("fill-mask", help="the likeliest tokens at each [MASK] of a text (BERT's masked-LM head)")
    p.add_argument("texts", nargs="*", metavar="TEXT", help='texts holding "[MASK]", e.g. "Paris is the [MASK] of '
                   'France."')
    add_model_flags(p, MODEL_HELP, required=True)
    p.add_argument("--top-k", type=positive_int, default=5, help="tokens per [MASK] (default 5)")
    p.add_argument("--json", action="store_true", help="print JSON: per text, per [MASK] from left to right, "
                   "a list of {token, id, probability} by falling probability")
    p.add_argument("--save", metavar="FILE.keras", help="also write the masked-LM model (raw text in) for "
                   "keras.models.load_model and `bert-keras export`")
    p.set_defaults(func=cmd_fill_mask)
