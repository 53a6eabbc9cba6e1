"""Runs Python code in a new interpreter on another Keras backend: the JAX route's tests build, train or load a
model there and hand arrays back through files, while the test's own process stays on TensorFlow (Keras picks
its backend once per process, at import).

    run_on_backend(code, backend="jax", devices=8)     # -> the program's standard output
    run_script(path, arg, ..., backend="jax")          # a script file as __main__, sys.argv = [path, args...]

`devices` > 1 sets XLA_FLAGS=--xla_force_host_platform_device_count, JAX's simulated CPU devices (the CPU
stand-in for a TPU's cores)."""

import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_on_backend(code: str, backend: str = "jax", devices: int = 1, timeout: float = 1200, cwd=None) -> str:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3",     # (a caller's PYTHONPATH after
           "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}  # the repo: a jax dir)
    env.pop("XLA_FLAGS", None)
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            env=env, timeout=timeout, cwd=cwd or REPO)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result.stdout


def run_script(script, *args, backend: str = "jax", devices: int = 1) -> str:
    """The Python file `script` run as __main__ on `backend` with sys.argv [script, *args] (each str()) -> its
    standard output (run_on_backend's)."""
    argv = [str(script), *map(str, args)]
    return run_on_backend(f"import runpy, sys; sys.argv = {argv!r}; runpy.run_path({argv[0]!r}, run_name='__main__')",
                          backend=backend, devices=devices)


def assert_close_at_real_positions(ours, theirs, name: str, atol: float = 1e-5) -> None:
    """Float outputs of the two backends agree within `atol`, except where padding is masked: span logits at
    padding are -10000 plus the head at a padding vector, 0 on TensorFlow (it skips padding) and computed on JAX
    (as under XLA). There both must stay below -9000, far below any real position."""
    import numpy as np
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    padding = ours < -9000
    assert (theirs[padding] < -9000).all(), name
    np.testing.assert_allclose(theirs[~padding], ours[~padding], atol=atol, rtol=0, err_msg=name)
