"""Out-of-range and conflicting flags for every subcommand, drawn from the CLI's own argparse definition
(`bert_keras_cli.main.build_parser()`): each subparser's actions are walked and each one's bad values come from
its `type`, `choices`, `nargs` and what its help says it names (a file or a folder), so a new flag is covered
without a new test. A new subcommand needs only a line in BASES: a cheap, valid command line the bad value is put
into (a case of a subcommand without one fails `test_every_subcommand_has_a_base`).

    cases = flag_cases()        # [Case('finetune-max-seq-length-zero', ...), ...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import random

from fuzz_cases import Case, slug

TINY = ("--model", "bert_tiny", "--vocab", "{vocab}")
# A valid, quick command line of each subcommand ({name}: a fuzz_inputs path, {out}: the case's output; its
# positionals before its flags), with whether it starts a run (fine-tuning, pretraining, an export, the demo) that
# a bad value might not stop.
BASES = {
    "demo": (("demo", "--quiet", "--out", "{out}"), True),
    "embed": (("embed", "a sentence"), False),
    "fill-mask": (("fill-mask", "a [MASK] b", *TINY), False),
    "presets": (("presets",), False),
    "convert": (("convert", "--checkpoint", "{hf_tiny}", "--out", "{out}.keras"), False),
    "vocab": (("vocab", "{corpus.txt}", "--out", "{out}.txt", "--size", "200"), False),
    "finetune": (("finetune", "--task", "sst-2", *TINY, "--train", "{sst2.tsv}", "--out", "{out}", "--epochs", "1",
                  "--batch-size", "2", "--max-seq-length", "16", "--max-train-examples", "4", "--quiet"), True),
    "pretraining-data": (("pretraining-data", "{corpus.txt}", "--vocab", "{vocab}", "--out", "{out}/r", "--workers",
                          "1", "--dupe-factor", "1", "--max-seq-length", "16", "--quiet"), False),
    "pretrain": (("pretrain", *TINY, "--text", "{corpus.txt}", "--train-steps", "2", "--save-every", "2",
                  "--batch-size", "2", "--max-seq-length", "16", "--out", "{out}", "--quiet"), True),
    "export": (("export", "--model", "{task.keras}", "--base-path", "{out}", "--name", "m"), True),
    "export-hub": (("export-hub", *TINY, "--out", "{out}", "--seq-length", "16"), True),
    "serve": (("serve", "{out}/no_export_here"), False),           # refused: a missing base path (never serves)
    "predict": (("predict", "--server", "127.0.0.1:9", "--model-name", "m", "--input", "text=a film", "--timeout",
                 "2"), False),                                      # nothing listens on port 9: UNAVAILABLE
    "attention": (("attention", "a text", *TINY, "--npz", "{out}.npz"), False),
    "features": (("features", "{corpus.txt}", *TINY, "--out", "{out}.npz", "--max-seq-length", "16"), False),
    "probe": (("probe", "--label", "ner", *TINY, "--data", "{conll_dir}", "--out", "{out}", "--train-sentences", "4",
               "--valid-sentences", "2", "--test-sentences", "2", "--epochs", "1", "--quiet"), True),
    "zoo list": (("zoo", "list"), False),
    "zoo get": (("zoo", "get", "{google_tiny}", "--quiet"), False),
}

# Words of an action's help (or metavar or dest) that say it names a path, and which kind.
FOLDER_WORDS = ("folder", "prefix", "base path", "DIR")
FILE_WORDS = ("file", ".keras", ".npz", "vocab.txt", "PNG", "tflite", "JSON", "text files", "globs")
OUTPUT_DESTS = ("out", "save", "npz", "google_out", "hf_out", "base_path")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """{'finetune': its parser, 'zoo get': its parser, ...}: every leaf subcommand of `parser`."""
    found = {}

    def walk(p, prefix):
        groups = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not groups:
            found[" ".join(prefix)] = p
        for group in groups:
            for name, child in group.choices.items():
                walk(child, [*prefix, name])
    walk(parser, [])
    return found


def path_kind(action) -> str | None:
    """'folder', 'file', 'either' (a checkpoint, a model) or None: what a str-typed action names, from its help."""
    if action.type is not None or action.choices or action.nargs == 0:
        return None
    text = " ".join(str(x) for x in (action.help or "", action.metavar or "", action.dest))
    folder = any(w in text for w in FOLDER_WORDS)
    file = any(w in text for w in FILE_WORDS)
    if action.dest in ("model", "checkpoint") or (folder and file):
        return "either"
    return "folder" if folder else "file" if file else None


def type_name(action) -> str:
    """The name of an action's `type`: positive_int, fraction, ... (bert_keras_cli.flag_types), int, float."""
    from bert_keras_cli import flag_types
    named = {getattr(flag_types, n): n for n in ("positive_int", "non_negative_int", "positive_float",
                                                  "non_negative_float", "fraction")}
    return named.get(action.type, getattr(action.type, "__name__", ""))


def _type_values(action) -> list[tuple[str, str]]:
    """(value kind, text) of the bad values for the action's `type`."""
    name = type_name(action)
    numbers = {"zero": "0", "negative": "-1", "not-a-number": "x", "exponent-1e30": "1e30", "nan": "nan",
               "inf": "inf", "over-int64": str(2 ** 63), "fraction-1.5": "1.5", "minus-0.1": "-0.1", "empty": ""}
    by_type = {
        "positive_int": ("zero", "negative", "not-a-number", "exponent-1e30", "over-int64", "fraction-1.5", "empty"),
        "non_negative_int": ("negative", "not-a-number", "exponent-1e30", "over-int64"),
        "positive_float": ("zero", "negative", "not-a-number", "nan", "inf", "exponent-1e30"),
        "non_negative_float": ("minus-0.1", "nan", "not-a-number", "exponent-1e30"),
        "fraction": ("fraction-1.5", "minus-0.1", "nan", "not-a-number"),
        "int": ("not-a-number", "negative", "over-int64", "fraction-1.5"),
        "float": ("not-a-number", "nan", "inf", "exponent-1e30"),
        "_flag_value": ("not-a-number", "empty"),
    }
    return [(kind, numbers[kind]) for kind in by_type.get(name, ("not-a-number",))]


UNDECODABLE = "\udcff\udcfe bad"        # what Python makes of argv bytes 0xff 0xfe (os.fsdecode's surrogateescape)


def bad_values(action) -> list[tuple[str, list[str] | None]]:
    """(value kind, argv values) of the bad values of one action; values None: the flag given bare (no value)."""
    if action.nargs == 0:                                         # store_true & co.: given a value
        return [("given-a-value", ["=yes"])]          # --quiet=yes
    if action.type is not None:
        values = [(k, [v]) for k, v in _type_values(action)]
        if action.nargs == "?":
            values.append(("bare", None))
        return values
    if action.choices:
        first = sorted(map(str, action.choices))[0]
        return [("not-a-choice", ["not-a-choice"]), ("empty", [""]), ("upper-case-choice", [first.upper()])]
    kind = path_kind(action)
    output = action.dest in OUTPUT_DESTS
    values = []
    if kind is not None:
        values += [("missing-path", ["{case}/no/such/path" if not output else "{case}/no_parent/x/out"])]
        if kind in ("file", "either"):
            values += [("a-folder", ["{a_folder}"])]
            if not output:                           # (an output file named again is written over: no case)
                values += [("empty-file", ["{empty.txt}"])]
        if kind in ("folder", "either"):
            values += [("a-file", ["{a_file}"])]
        values += [("inside-a-file", ["{a_file}/x"])]
    values += [("empty", [""]), ("undecodable", [UNDECODABLE]), ("dash-value", ["-x"])]
    if action.dest == "input":
        values += [("no-equals", ["a film"]), ("undecodable-text", ["text=" + UNDECODABLE]), ("no-name", ["=a"]),
                   ("two-names", ["text_a=a", "--input", "text_b=b"])]
    return values


def _split(base, command_words: int) -> tuple[list[str], list[str], list[list[str]]]:
    """(command words, positionals, [[flag, values...], ...]) of an argv whose positionals come before its flags
    (BASES are written so) or after a `--`."""
    head, rest = list(base[:command_words]), list(base[command_words:])
    positionals, groups = [], []
    while rest:
        token = rest.pop(0)
        if token == "--":
            positionals += rest
            break
        if token.startswith("--"):
            groups.append([token])
        elif groups:
            groups[-1].append(token)
        else:
            positionals.append(token)
    return head, positionals, groups


def _join(head, positionals, groups) -> list[str]:
    """The argv of _split's parts: positionals after a `--` at the end (so none is read as a flag's value)."""
    return [*head, *itertools.chain(*groups), *(["--", *positionals] if positionals else [])]


def with_flag(base, command_words: int, action, values: list[str] | None) -> list[str]:
    """`base` with `action` set to `values` (replacing its own value; a positional's values replaced); values
    None: the flag given bare."""
    head, positionals, groups = _split(base, command_words)
    if not action.option_strings:
        return _join(head, list(values or []), groups)
    groups = [g for g in groups if g[0].split("=")[0] not in action.option_strings]
    flag = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])
    if values is None or not values:
        groups.append([flag])
    elif values[0].startswith("="):                 # --flag=value
        groups.append([flag + values[0], *values[1:]])
    elif values[0].startswith("-"):                 # a value argparse would read as a flag: --flag=-x
        groups.append([f"{flag}={values[0]}", *values[1:]])
    else:
        groups.append([flag, *values])
    return _join(head, positionals, groups)


def without(base, command_words: int, action) -> list[str]:
    """`base` without `action` (a positional: without every positional)."""
    head, positionals, groups = _split(base, command_words)
    if not action.option_strings:
        return _join(head, [], groups)
    return _join(head, positionals, [g for g in groups if g[0] not in action.option_strings])


def _parses(parser, argv: list[str]) -> bool:
    """Whether argparse accepts `argv` (placeholders and all: it checks types and choices, not paths)."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            args, extra = parser.parse_known_args(argv)
        except SystemExit:
            return False
    return not extra or bool(getattr(args, "runner", None))


def flag_cases(seed: int = 0) -> list[Case]:
    """Every (subcommand, action, bad value) case, plus per subcommand: a required flag left out, an unknown
    flag, and conflicting pairs of its own flags; ids `<command>-<flag>-<value kind>`."""
    from bert_keras_cli.main import build_parser
    parser = build_parser()
    cases = []
    for command, sub in subcommands(parser).items():
        if command not in BASES:
            cases.append(Case(f"{slug(command)}-has-no-base", ("no-base-for", command)))
            continue
        base, heavy = BASES[command]
        words = len(command.split())
        actions = [a for a in sub._actions if not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]
        for action in actions:
            name = slug(action.option_strings[-1] if action.option_strings else action.dest)
            for kind, values in bad_values(action):
                argv = with_flag(base, words, action, values)
                reaches_command = _parses(parser, argv)
                if command == "demo" and reaches_command and kind != "a-file":
                    continue                       # the demo would run for minutes: only its refused values
                cases.append(Case(f"{slug(command)}-{name}-{slug(kind)}", tuple(argv),
                                  heavy=heavy and reaches_command, seconds=40 if heavy else 60))
            if action.required and command != "demo":      # the demo without its sentences runs: not a bad input
                cases.append(Case(f"{slug(command)}-{name}-left-out", tuple(without(base, words, action))))
        cases.append(Case(f"{slug(command)}-unknown-flag", (*base, "--no-such-flag", "1")))
        cases.extend(_conflicts(parser, command, base, words, actions, heavy, random.Random(f"{command}-{seed}")))
    return cases


def _good_value(action) -> list[str] | None:
    """A value the action's own type and choices accept (for the conflicting-pairs cases), or None (bare)."""
    if action.nargs == 0:
        return []
    if action.choices:
        return [sorted(map(str, action.choices))[-1]]
    name = type_name(action)
    small = {"positive_int": "3", "non_negative_int": "0", "positive_float": "0.5", "non_negative_float": "0",
             "fraction": "1", "int": "0", "float": "0.5", "_flag_value": "true"}
    if name in small:
        return [small[name]]
    kind = path_kind(action)
    if kind == "folder" or action.dest in OUTPUT_DESTS:
        return ["{out}"]
    if kind in ("file", "either"):
        return ["{corpus.txt}"]
    return ["x"]


def _conflicts(parser, command, base, words, actions, heavy, rng) -> list[Case]:
    """Pairs of the subcommand's own optional flags given together, each with a value its type accepts: what
    one flag asks for may contradict the other (e.g. --pack without --seq-length, --records with --text)."""
    optional = [a for a in actions if a.option_strings and not a.required]
    pairs = list(itertools.combinations(optional, 2))
    cases = []
    for a, b in rng.sample(pairs, min(len(pairs), 8)):
        argv = with_flag(base, words, a, _good_value(a))
        argv = with_flag(tuple(argv), words, b, _good_value(b))
        reaches = _parses(parser, argv)
        if command == "demo" and reaches:
            continue
        name = f"{slug(command)}-{slug(a.option_strings[-1])}-with-{slug(b.option_strings[-1])}"
        cases.append(Case(name, tuple(argv), heavy=heavy and reaches, seconds=40 if heavy else 60))
    return cases
