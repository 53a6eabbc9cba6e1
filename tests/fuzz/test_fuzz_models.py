"""The bad-input fuzzer's models cases (tests/fuzz/fuzz_models.py; docs/bad-input-fuzzer.md): this run's share of
$BERT_KERAS_FUZZ_CASES, drawn with $BERT_KERAS_FUZZ_SEED, each run through `bert_keras_cli.main.main(argv)` and
judged by the oracle (fuzz_oracle.py): exit 0, or exit 2 with one line and no traceback; nothing half-written."""

import pytest

from fuzz_inputs import fuzz_inputs  # noqa: F401 (the module's fixture)
from fuzz_run import run_and_check
from fuzz_universe import drawn


pytestmark = pytest.mark.integration    # whole commands, a few hundred of them: minutes (docs/bad-input-fuzzer.md)


@pytest.mark.parametrize("case", drawn("models"))
def test_fuzz_case(case, fuzz_inputs, tmp_path, capsys, monkeypatch):  # noqa: F811
    run_and_check(case, fuzz_inputs, tmp_path, capsys, monkeypatch)
