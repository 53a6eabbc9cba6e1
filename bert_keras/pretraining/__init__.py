"""Pretraining: google-research's data format (records.py), its instance recipe (instances.py) run by the keyed
generator locally or on Apache Beam (keyed.py, local.py, beam.py), tf.data pipelines (dataset.py) and the
resumable training loop (trainer.py)."""

from __future__ import annotations

from bert_keras.pretraining.instances import MaskingConfig
from bert_keras.pretraining.records import check_records, feature_spec, record_files
from bert_keras.pretraining.trainer import PretrainConfig, pretrain


def create_pretraining_data(inputs: list[str], preprocessor, out: str, num_shards: int = 1,
                            config: MaskingConfig = MaskingConfig(), seed: int = 12345,
                            progress: bool = False, workers: int | None = None, bucket_mb: float = 64,
                            pack: bool = False) -> dict:
    """Text files -> `<out>-0000i-of-0000n.tfrecord` shards, by the keyed generator (keyed.py) on a local pool of
    `workers` processes (default: one per core); returns counts and the shard paths.

    The files are a function of (inputs, flags, seed) alone: the same bytes whatever `workers` (and the same as
    `bert_keras.pretraining.beam.run_beam` writes). Memory follows `bucket_mb` (the text per bucket: documents
    are grouped by a hash of their content, and random next sentences come from the same bucket), not the
    corpus. `progress` shows a bar per phase.

    Args:
        inputs: text files, one sentence a line, a blank line between documents.
        preprocessor: a BertPreprocessor (its vocabulary and casing are what the workers use).
        out: output prefix; num_shards: output files.
        config: MaskingConfig; seed: the random seed.
        pack: write packed rows of up to 3 whole instances (packing.py, packed_records.py: rows are a function of
            the instances in key order alone, so still the same bytes whatever the workers or back end).

    Example:
        >>> create_pretraining_data(["wiki.txt"], BertPreprocessor("vocab.txt"), "data/wiki", 4)  # doctest: +SKIP
    """
    from bert_keras.pretraining.keyed import make_plan
    from bert_keras.pretraining.local import run_local
    plan = make_plan(inputs, num_shards, config, seed, bucket_mb)
    return run_local(plan, out, preprocessor, workers, progress=_phase_bars if progress else None, pack=pack)


def _phase_bars(unit: str, total: int):
    return _bar(total, unit, True)


def _bar(total: int, unit: str, show: bool):
    """A keras Progbar's add() as a progress callback, or None."""
    if not show:
        return None
    import keras
    bar = keras.utils.Progbar(total, unit_name=unit)
    return bar.add


__all__ = ["MaskingConfig", "PretrainConfig", "check_records", "create_pretraining_data", "feature_spec", "pretrain",
           "record_files"]
