"""--schedule linear against transformers' own get_linear_schedule_with_warmup (the reference the acceptance
tools train with), step by step, as LambdaLR applies it to the optimizer's updates. Marked `torch`: run by
`make test-torch`."""

import numpy as np
import pytest

from bert_keras.training import WarmupLinearDecay

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("warmup, total", [(0, 7), (1, 10), (10, 100), (33, 330), (5, 5)])
def test_linear_schedule_is_transformers(warmup, total):
    import torch                                   # the [torch] extra (make test-torch): missing is a failure
    import transformers
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([parameter], lr=3e-5)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, warmup, total)
    want = []
    for _ in range(total + 3):                     # the rate each update uses; past the end too
        want.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    ours = WarmupLinearDecay(3e-5, warmup, total, schedule="linear")
    np.testing.assert_allclose([float(ours(step)) for step in range(total + 3)], want, rtol=1e-5, atol=1e-12)
