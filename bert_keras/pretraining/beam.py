"""The Apache Beam back end of the keyed generator (keyed.py): the same per-range, per-bucket and per-shard
functions as local.py, as a Beam pipeline, so Dataflow, Flink, Spark or Dask can spread the work.

    byte ranges -> scatter (bucket, documents) -> GroupByKey bucket -> instances (shard, sorted chunk)
    -> GroupByKey shard -> merge by key, write the shard (temporary name, then renamed)

The bytes written equal the local back end's for the same inputs, flags and seed. Inputs and outputs may be
local paths or anything tf.io.gfile opens (gs://...). apache_beam is imported here only: `pip install
bert-keras[beam]`.

"DirectRunner" runs Beam's FnApiRunner itself (in `multi_processing` mode with a worker per core unless
--direct_running_mode / --direct_num_workers say otherwise): Beam >= 2.68 would otherwise try its Prism runner
first, a binary it downloads.
"""

from __future__ import annotations

from bert_keras import storage
from bert_keras.pretraining.keyed import Plan, bucket_instances, chunk_records, make_plan, merge_records, \
    scatter_range, write_shard
from bert_keras.pretraining.instances import MaskingConfig
from bert_keras.pretraining.output_prefix import make_output_folder, remove_created_folders
from bert_keras.pretraining.packed_records import shard_frames
from bert_keras.pretraining.parallel import usable_cores


def _beam():
    try:
        import apache_beam
    except ImportError:
        raise ImportError("--runner needs Apache Beam: pip install 'bert-keras[beam]' (apache-beam[tfrecord]); "
                          "without --runner the local back end needs nothing more") from None
    return apache_beam


def _option_given(args: list[str], name: str) -> bool:
    return any(a == f"--{name}" or a.startswith(f"--{name}=") for a in args)


def pipeline_runner(runner: str, pipeline_args: list[str]):
    """(runner for beam.Pipeline, its PipelineOptions). DirectRunner -> the FnApiRunner, multi_processing with a
    worker per core by default (explicitly: no Prism download); any other name is Beam's to resolve."""
    _beam()
    from apache_beam.options.pipeline_options import PipelineOptions
    args = list(pipeline_args)
    if runner in ("DirectRunner", "FnApiRunner"):
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner
        if not _option_given(args, "direct_running_mode"):
            args.append("--direct_running_mode=multi_processing")
        if not _option_given(args, "direct_num_workers"):
            args.append(f"--direct_num_workers={usable_cores()}")
        return FnApiRunner(), PipelineOptions(args)
    if runner == "DaskRunner":                         # not in Beam's list of runner names
        from apache_beam.runners.dask.dask_runner import DaskRunner
        return DaskRunner(), PipelineOptions(args)
    return runner, PipelineOptions(args)


def _scatter(r: int, plan: Plan):
    return sorted(scatter_range(plan, r).items())


def _write(shard_chunks, plan: Plan, out: str, pack: bool = False) -> int:
    from apache_beam.metrics import Metrics
    shard, chunks = shard_chunks
    n = write_shard(plan.shard_path(out, shard),
                    shard_frames(plan, merge_records([chunk_records(c) for c in chunks if c]), pack))
    Metrics.counter("pretraining", "records").inc(n)
    return n


def build_pipeline(pipeline, plan: Plan, out: str, vocab: list[str], lower_case: bool, pack: bool = False):
    """Adds the generator's steps to `pipeline` (a beam.Pipeline); pack: write packed rows."""
    beam = _beam()

    class BucketFn(beam.DoFn):
        """(bucket, its documents' blobs) -> (shard, chunk) for each of its chunks; counts into metrics."""

        def setup(self):
            from bert_keras.preprocessing import BertPreprocessor
            self.preprocessor = BertPreprocessor(vocab, lower_case=lower_case)

        def process(self, element):
            bucket, blobs = element
            result = bucket_instances(plan, bucket, sorted(blobs), self.preprocessor, threads=1)
            for name in ("documents", "sentences", "instances"):
                beam.metrics.Metrics.counter("pretraining", name).inc(getattr(result, name))
            yield from result.chunks

    chunks = (pipeline
              | "Ranges" >> beam.Create(list(range(len(plan.ranges))))
              | "Spread" >> beam.Reshuffle()
              | "Scatter" >> beam.FlatMap(_scatter, plan)
              | "ByBucket" >> beam.GroupByKey()
              | "Instances" >> beam.ParDo(BucketFn()))
    every_shard = pipeline | "EveryShard" >> beam.Create([(s, b"") for s in range(plan.shards)])
    return ((chunks, every_shard)
            | "All" >> beam.Flatten()
            | "ByShard" >> beam.GroupByKey()
            | "Write" >> beam.Map(_write, plan, out, pack))


def run_beam(inputs: list[str], preprocessor, out: str, num_shards: int = 1, config: MaskingConfig = MaskingConfig(),
             seed: int = 12345, bucket_mb: float = 64, runner: str = "DirectRunner",
             pipeline_args: list[str] = (), pack: bool = False) -> dict:
    """create_pretraining_data on Apache Beam: the same files, byte for byte, as the local back end.

    Args:
        inputs, preprocessor, out, num_shards, config, seed, bucket_mb, pack: as create_pretraining_data.
        runner: a Beam runner name (DirectRunner, DataflowRunner, FlinkRunner, SparkRunner, DaskRunner...).
        pipeline_args: Beam pipeline options, e.g. ["--project=p", "--region=us-central1",
            "--temp_location=gs://b/tmp", "--extra_package=dist/bert_keras-0.1.0-py3-none-any.whl"].

    Returns counts (from the pipeline's metrics; None on a runner without them) and the shard paths. A corpus with
    fewer than two documents is an error after the run (the shards it wrote, empty, are removed, and the output's
    folder if the run created it).

    Example:
        >>> run_beam(["wiki.txt"], BertPreprocessor("vocab.txt"), "data/wiki", 4,
        ...          runner="DirectRunner", pipeline_args=["--direct_num_workers=2"])  # doctest: +SKIP
    """
    beam = _beam()
    from apache_beam.metrics.metric import MetricsFilter
    plan = make_plan(inputs, num_shards, config, seed, bucket_mb)
    runner, options = pipeline_runner(runner, list(pipeline_args))
    pipeline = beam.Pipeline(runner=runner, options=options)
    build_pipeline(pipeline, plan, out, list(preprocessor.vocab), preprocessor.lower_case, pack)
    created = make_output_folder(out)
    result = pipeline.run()
    result.wait_until_finish()
    counts = {}
    for name in ("documents", "sentences", "instances", "records"):
        try:
            found = result.metrics().query(MetricsFilter().with_namespace("pretraining").with_name(name))["counters"]
        except NotImplementedError:                    # the DaskRunner keeps no metrics
            counts[name] = None
            continue
        counts[name] = sum((m.committed if m.committed is not None else m.attempted) or 0 for m in found)
    if counts["documents"] is not None and counts["documents"] < 2:
        for shard in range(plan.shards):               # written empty: refused input leaves nothing behind
            path = plan.shard_path(out, shard)
            if storage.exists(path):
                storage.remove(path)
        remove_created_folders(created)
        raise ValueError(f"{counts['documents']} non-empty document(s) in {', '.join(plan.files)}: next-sentence "
                         "prediction needs at least two (separate documents by a blank line)")
    return {"documents": counts["documents"], "sentences": counts["sentences"], "instances": counts["instances"],
            "records": counts["records"], "files": [plan.shard_path(out, s) for s in range(plan.shards)]}
