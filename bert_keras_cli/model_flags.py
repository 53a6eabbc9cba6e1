"""--model/--vocab/--cased, the same in every subcommand that takes a model, and the one way they become a model."""

from __future__ import annotations

from bert_keras_cli.errors import CommandError


def add_model_flags(p, model_help: str, required: bool = False) -> None:
    """Adds --model/--vocab/--cased to the subcommand parser `p`."""
    p.add_argument("--model", required=required, help=model_help)
    p.add_argument("--vocab", help="vocab.txt, when the model has none beside it (neither vocab.txt nor a Hugging "
                   "Face tokenizer.json: e.g. a preset name)")
    p.add_argument("--cased", action="store_true", default=None,
                   help="keep case and accents (default: tokenizer.json's casing, else read from the vocabulary)")


def lower_case(args) -> bool | None:
    """--cased as BertPreprocessor's lower_case: None (read from the vocabulary) unless given."""
    return None if args.cased is None else not args.cased


def load_model_flags(args, **preprocessor_args):
    """(source, encoder, preprocessor) for --model (default: the real all-MiniLM-L6-v2), --vocab and --cased; a
    source that cannot be read is a CommandError naming why. The commands that take these flags (features, probe,
    attention) read hidden states or attention, never the pooler: a checkpoint without one loads without its
    warning."""
    from bert_keras.checkpoints.load import pooler_unused
    from bert_keras.loading import bundled_minilm_folder, load_backbone
    from bert_keras.source_config import check_max_seq_length
    try:
        source = args.model or bundled_minilm_folder()
        for key in ("max_seq_length", "seq_length"):        # named as flags, before anything loads
            check_max_seq_length(source, preprocessor_args.get(key), "--" + key.replace("_", "-"))
        with pooler_unused():
            return (source, *load_backbone(source, args.vocab, lower_case(args), **preprocessor_args))
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        raise CommandError(str(e)) from None
