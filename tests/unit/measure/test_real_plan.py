"""The real-data run's length and warm-up, planned from the pipeline as built (a real
MaxText-shaped Grain pipeline; nothing is iterated)."""

from __future__ import annotations

from pipecheck.measure.real_run import plan_real
from pipecheck.records.grain_settings import GrainSettings

from ..data.test_read_elements_per_batch import packed

OWN_READ_64 = GrainSettings(workers=0, threads=4, prefetch=64)
"""As compare runs a pipeline with its own grain.ReadOptions(num_threads=4,
prefetch_buffer_size=64) and no workers."""


def test_a_document_prefetch_is_a_few_batches_of_warmup():
    plan = plan_real(packed(16), OWN_READ_64, 60)
    assert (plan.steps, plan.warmup, plan.warning) == (60, 5, None)


def test_maxtexts_default_prefetch_sizes_the_run_up_and_says_why():
    plan = plan_real(packed(16), GrainSettings(workers=0, threads=4, prefetch=500), 60)
    assert (plan.steps, plan.warmup) == (64, 33)
    assert plan.warning == (
        "the pipeline holds up to 32 batches ready at start-up (a read prefetch buffer of "
        "500 elements, at least 16 per batch: 32 batches): their steps are warm-up, so the "
        "real-data run took 64 steps instead of the 60 asked for (--steps), 30 of them steady")


def test_workers_each_read_ahead_and_hold_their_output_buffers():
    plan = plan_real(packed(16), GrainSettings(workers=2, per_worker_buffer=2, threads=4,
                                               prefetch=500), 60)
    assert plan.warmup == 1 + 2 * 2 + 2 * 32
    assert plan.steps == plan.warmup + 30 + 1
    assert plan.warning is not None and (
        "32 batches in each of 2 workers, and 2 x 2 in their output buffers" in plan.warning)


def test_a_pipeline_built_per_setting_is_read_as_built():
    from pipecheck.data.per_setting import PerSetting

    built: list[GrainSettings] = []

    def build(settings: GrainSettings):
        built.append(settings)
        return packed(4)  # MaxText's tiny config: per_device_batch_size 4, one device

    maxtext_default = GrainSettings(workers=0, threads=16, prefetch=500)
    plan = plan_real(PerSetting(build, "MaxText's"), maxtext_default, 30)
    assert built == [maxtext_default]
    assert plan.warmup == 1 + 125  # 500 documents, at least 4 a batch
    assert plan.steps == 126 + 15 + 1


def test_the_loader_shape_a_periodic_stall_is_matched_to():
    import grain

    from pipecheck.analysis.periodic_stall import LoaderShape
    from pipecheck.data.grain_pipeline import BatchedExamples
    from pipecheck.measure.real_run import loader_shape

    examples = BatchedExamples(grain.MapDataset.range(96), 8)
    settings = GrainSettings(workers=2, per_worker_buffer=3, threads=2, prefetch=32)
    # 96 examples of 8 a batch: 12 batches an epoch; 32 read elements are 4 batches
    assert loader_shape(examples, settings) == LoaderShape(2, 3, 4, 12, threads=2,
                                                           elements_per_batch=8)
    forever = BatchedExamples(grain.MapDataset.range(96).repeat(), 8)
    assert loader_shape(forever, settings).epoch_steps is None
    assert loader_shape(packed(16), settings).epoch_steps is None  # an IterDataset
