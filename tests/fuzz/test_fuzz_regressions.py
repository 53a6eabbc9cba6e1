"""The cases the fuzzer found failing (tests/fuzz/regressions.py), run by name on every run whatever the seed
draws."""

import pytest

from fuzz_inputs import fuzz_inputs  # noqa: F401 (the module's fixture)
from fuzz_run import run_and_check
from fuzz_universe import as_param, find_case
from regressions import REGRESSIONS


pytestmark = pytest.mark.integration    # whole commands, a few hundred of them: minutes (docs/bad-input-fuzzer.md)


@pytest.mark.parametrize("case", [as_param(find_case(i)) for i in REGRESSIONS])
def test_regression(case, fuzz_inputs, tmp_path, capsys, monkeypatch):  # noqa: F811
    run_and_check(case, fuzz_inputs, tmp_path, capsys, monkeypatch)
