"""What a run records about itself, so it can be read later and repeated: every setting, the seed, the package
versions and the machine. `finetune` writes it into metrics.json; `config_from_record` reads the settings back
(`bert-keras finetune --from-record metrics.json --out new_run` repeats the run)."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import platform
import sys


def versions() -> dict:
    """The versions of Python and of the packages a run's numbers depend on (None: not installed)."""
    import bert_keras
    found = {"python": sys.version.split()[0], "bert_keras": bert_keras.__version__}   # the code that ran
    for package in ("tensorflow", "keras", "tensorflow-text", "numpy", "jax", "jaxlib"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host(strategy) -> dict:
    """The machine a run trained on: CPU, core count, Keras' backend, accelerators, the distribution strategy (on
    JAX: Keras' distribution, JAX's devices over all processes and the process count) and its replicas (devices a
    batch is split over)."""
    import keras
    import tensorflow as tf

    from bert_keras.backends import distributed_devices
    found = {"platform": platform.platform(), "cpu": cpu_name(), "cpus": os.cpu_count(),
             "backend": keras.backend.backend()}
    if keras.backend.backend() == "jax":
        import jax
        devices = jax.devices()
        distribution = keras.distribution.distribution()
        return {**found, "accelerators": [str(d) for d in devices if d.platform != "cpu"],
                "devices": f"{devices[0].platform} x {len(devices)}",
                "strategy": type(distribution).__name__ if distribution else "one device",
                "replicas": distributed_devices(), "processes": jax.process_count()}
    accelerators = [d.name for d in tf.config.list_logical_devices() if d.device_type not in ("CPU",)]
    return {**found, "accelerators": accelerators, "strategy": type(strategy).__name__,
            "replicas": strategy.num_replicas_in_sync}


def run_record(config, strategy) -> dict:
    """{"config": every setting of `config` (a dataclass), "seed", "versions", "host"}: the part of a run's
    metrics.json that says how to repeat it.

    Example:
        >>> import tensorflow as tf
        >>> from bert_keras.finetune import FinetuneConfig
        >>> config = FinetuneConfig(task="sst-2", model="bert_tiny", out="run")
        >>> record = run_record(config, tf.distribute.get_strategy())
        >>> record["config"]["batch_size"], record["seed"]
        (32, 0)
    """
    import keras
    settings = {**dataclasses.asdict(config), "backend": keras.backend.backend()}    # what ran, for --from-record
    return {"config": settings, "seed": config.seed, "versions": versions(),
            "host": host(strategy)}


def config_from_record(path: str, config_class, **changes):
    """The settings a run recorded (the "config" of its metrics.json), as `config_class`, with `changes` applied
    (e.g. out= a new folder).

    Example:
        >>> from bert_keras.finetune import FinetuneConfig, finetune
        >>> config = config_from_record("run/metrics.json", FinetuneConfig, out="run2")      # doctest: +SKIP
        >>> finetune(config)                                                                 # doctest: +SKIP
    """
    from bert_keras import storage
    with storage.open(path) as f:
        record = json.load(f)
    if "config" not in record:
        raise ValueError(f"{path} records no settings (\"config\"): it was written by an older bert_keras or is "
                         "not a run's metrics.json; repeat the run with its flags instead")
    names = {f.name for f in dataclasses.fields(config_class)}
    unknown = sorted(set(record["config"]) - names)
    if unknown:
        raise ValueError(f"{path} records settings this bert_keras does not know ({', '.join(unknown)}): it was "
                         "written by another version")
    return config_class(**{**record["config"], **changes})
