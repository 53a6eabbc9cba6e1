"""A Python warning in the `bert-keras` command's output is one line: Python prints the warning's source line under
it (for Keras' "Gradients do not exist for variables [...]" that line was Keras' own `  warnings.warn(`, in
`pretrain --text` at f6d849e). main() sets the format before any command runs (absl_logs.one_line_warnings)."""

import warnings

from bert_keras_cli.main import main


def PYTHONS_FORMAT(message, category, filename, lineno, line=None):       # noqa: N802  (warnings.py's own)
    return warnings._formatwarnmsg_impl(warnings.WarningMessage(message, category, filename, lineno, None, line))

# Keras' call, as it stands in keras/src/optimizers/base_optimizer.py: a message and the call's own line below.
SOURCE = "import warnings\nwarnings.warn(\n    'Gradients do not exist for variables'\n)\n"


def test_the_commands_warnings_are_one_line_without_their_source(tmp_path, monkeypatch, capsys):
    # Python's own format (another test's main() in this worker may have set ours already), put back after.
    monkeypatch.setattr(warnings, "formatwarning", PYTHONS_FORMAT)
    source = tmp_path / "base_optimizer.py"
    source.write_text(SOURCE)
    message = "Gradients do not exist for variables ['pooler/kernel'] when minimizing the loss.\nIf using ..."
    python = warnings.formatwarning(message, UserWarning, str(source), 2)
    assert "  warnings.warn(" in python.splitlines(), python                    # what Python prints by itself
    assert main(["presets"]) == 0
    capsys.readouterr()
    line = warnings.formatwarning(message, UserWarning, str(source), 2)
    assert line == (f"{source}:2: UserWarning: Gradients do not exist for variables ['pooler/kernel'] when "
                    "minimizing the loss. If using ...\n")
