"""All the generators' cases, the seeded draw of a run (its share of $BERT_KERAS_FUZZ_CASES for each group), and
the lookup of one case by its id (for tests/fuzz/regressions.py).

    cases = drawn("flags")          # this run's flag cases ($BERT_KERAS_FUZZ_IDS=id,id: those cases only)
    case = find_case("finetune-max-seq-length-zero")
"""

from __future__ import annotations

import os
import re

import pytest

from fuzz_cases import DEFAULT_CASES, Case, draw, seed_and_count, unique
from fuzz_data import data_cases
from fuzz_flags import flag_cases
from fuzz_models import model_cases

# Each group's share of a run: flags are cheap (most end in argparse), data and model cases may run a command.
SHARES = {"flags": 0.6, "data": 0.25, "models": 0.15}


def universe(group: str, variants: int = 3) -> list[Case]:
    """Every case of `group` (flags, data or models); randomized mutations `variants` times each."""
    make = {"flags": flag_cases, "data": lambda: data_cases(variants), "models": lambda: model_cases(variants)}
    return unique(make[group]())


def drawn(group: str) -> list:
    """This run's cases of `group` as pytest params (ids: the case ids), each known failure of
    regressions.KNOWN_FAILURES marked xfail(strict=True) with its reason."""
    chosen = [i for i in os.environ.get("BERT_KERAS_FUZZ_IDS", "").split(",") if i]
    if chosen:                                              # these cases by name, whatever the seed draws
        return [as_param(find_case(i)) for i in chosen if find_group(i) == group]
    seed, count = seed_and_count()
    n = round(count * SHARES[group])
    variants = max(3, -(-count // DEFAULT_CASES) * 3)        # more variants of the random mutations in a larger run
    cases = draw(universe(group, variants), n, seed + sorted(SHARES).index(group))
    return [as_param(c) for c in cases]


def as_param(case: Case):
    """The pytest param of a case: its id, and its known-failure mark if regressions.py lists it."""
    from regressions import KNOWN_FAILURES
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[case.id])] if case.id in KNOWN_FAILURES else []
    return pytest.param(case, id=case.id, marks=marks)


def find_group(case_id: str) -> str:
    """The group (flags, data, models) whose generator makes `case_id`."""
    match = re.search(r"-(\d+)$", case_id)
    variants = max(3, int(match.group(1)) + 1) if match else 3
    return next(g for g in SHARES if any(c.id == case_id for c in universe(g, variants)))


def find_case(case_id: str) -> Case:
    """The case whose id is `case_id`, from whichever group makes it (enough variants for its -N suffix)."""
    match = re.search(r"-(\d+)$", case_id)
    variants = max(3, int(match.group(1)) + 1) if match else 3
    for group in SHARES:
        for case in universe(group, variants):
            if case.id == case_id:
                return case
    raise KeyError(f"no generator makes a case {case_id!r} any more")
