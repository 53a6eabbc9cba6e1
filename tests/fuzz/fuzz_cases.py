"""A generated bad-input case, and the seeded draw of a run's cases from the generators' universe.

A case is an argv template with placeholders: `{name}` a shared input's path (fuzz_inputs), `{out}` the case's
output path (inside its own folder), `{F}` the mutated file or folder its `prepare` wrote into that folder. Its id
names what it is (`finetune-max-seq-length-zero`, `finetune-sst-2-train-truncated-3`): the content of a mutated
file comes from `random.Random(id)`, so an id alone rebuilds its case (tests/fuzz/regressions.py keeps ids).

    cases = draw(universe(variants=4), count=300, seed=55)

$BERT_KERAS_FUZZ_SEED and $BERT_KERAS_FUZZ_CASES choose the draw (defaults: DEFAULT_SEED, DEFAULT_CASES).
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
from typing import Callable

DEFAULT_SEED = 55                  # issue 55
DEFAULT_CASES = 300
HEAVY_SHARE = 0.04                 # of a draw, at most: cases that may start a training or export run


@dataclasses.dataclass(frozen=True)
class Case:
    """One generated input: `id`, the argv template, what to write before it runs, and its time bound.

    `heavy`: the command may start a run (fine-tuning, pretraining, an export) when it accepts the input; such a
    case still running at its bound is skipped, not failed (a run this fuzzer does not wait for)."""

    id: str
    argv: tuple
    prepare: Callable | None = dataclasses.field(default=None, compare=False)
    heavy: bool = False
    seconds: float = 30.0

    def render(self, inputs: dict, case_dir) -> list[str]:
        """The argv with its placeholders filled (`{out}` and `{F}` inside `case_dir`)."""
        values = {**{k: str(v) for k, v in inputs.items()}, "out": str(case_dir / "out"), "F": str(case_dir / "F"),
                  "case": str(case_dir)}
        return [re.sub(r"\{([A-Za-z_][\w.-]*)\}", lambda m: values.get(m.group(1), m.group(0)), a)
                for a in self.argv]


def slug(text: str) -> str:
    """`--max-seq-length` -> `max-seq-length`; `zoo get` -> `zoo-get` (for case ids)."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def seed_and_count() -> tuple[int, int]:
    """($BERT_KERAS_FUZZ_SEED, $BERT_KERAS_FUZZ_CASES), or the defaults."""
    return (int(os.environ.get("BERT_KERAS_FUZZ_SEED", DEFAULT_SEED)),
            int(os.environ.get("BERT_KERAS_FUZZ_CASES", DEFAULT_CASES)))


def draw(cases: list[Case], count: int, seed: int, heavy_share: float = HEAVY_SHARE) -> list[Case]:
    """`count` of `cases` chosen with `random.Random(seed)` (all of them if fewer), at most `heavy_share` of them
    heavy (at least one when any is), in id order."""
    rng = random.Random(seed)
    light = [c for c in cases if not c.heavy]
    heavy = [c for c in cases if c.heavy]
    n_heavy = min(len(heavy), max(1, int(count * heavy_share)) if heavy else 0)
    chosen = rng.sample(heavy, n_heavy) + rng.sample(light, min(len(light), count - n_heavy))
    return sorted(chosen, key=lambda c: c.id)


def unique(cases: list[Case]) -> list[Case]:
    """`cases` with the ids checked unique (a generator bug otherwise)."""
    ids = [c.id for c in cases]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicated, f"duplicate case ids: {duplicated[:10]}"
    return cases
