# ruff: noqa: E501 - the expected report is wider than the code
"""The dataloader reporter: exact text for a hand-built result."""

from __future__ import annotations

from pipecheck.report.dataloader import format_dataloader
from tests.unit.measure.test_dataloader import make_result

EXPECTED = """\
pipecheck dataloader: the input pipeline alone (workload demo, source demo; 4 batches timed after the first, with device_put)

workers    threads    first batch    D/batch    95% CI              median    p90      p99      batches/s    examples/s    tokens/s
---------  ---------  -------------  ---------  ------------------  --------  -------  -------  -----------  ------------  ------------
2          1          1.50 s         25.0 ms    15.0 ms .. 35.0 ms  25.0 ms   37.0 ms  39.7 ms  40.0         320.0 ex/s    40.96 ktok/s
D/batch: the loader time compare uses, the mean per batch (1 / throughput) without the batches workers buffered at start-up.

Stage breakdown (Grain stage timing; wait = share of the pipeline's time spent in the stage):

workers=2 threads=1: slowest stage MapMapDataset(transform=TokenizeAndPack(seq_len=128)) (64.0%)
stage                                                    where    wait    per element    elements
-------------------------------------------------------  -------  ------  -------------  ----------
InterleaveDatasetIterator([2 datasets], cycle_length=2)  main     1.0%    0.10 ms        21
BatchDatasetIterator(batch_size=8, drop_remainder=True)  workers  5.0%    0.17 ms        24
MapMapDataset(transform=TokenizeAndPack(seq_len=128))    workers  64.0%   0.25 ms        192
SourceMapDataset(source=IndexedSource)                   workers  30.0%   0.05 ms        192

warning: workers=2 threads=1: large spread"""


def test_format_dataloader_exact():
    assert format_dataloader(make_result()) == EXPECTED


def _with_resources():
    from dataclasses import replace

    from pipecheck.analysis.loader.loader_limits import limit_findings
    from pipecheck.records.dataloader import Resources

    result = make_result()
    busy = Resources(batches=4, wall_s=0.1, main_cpu_s=0.09, worker_cpu_s=0.01,
                     workers_seen=2, main_rss_mb=300.0, worker_rss_mb=200.0,
                     workers_rss_mb=400.0)
    (setting,) = result.results
    setting = replace(setting, resources=busy, stages=())
    return replace(result, results=(setting,), env={"jax": "0.10.2", "cpu_count": 2}), \
        limit_findings([setting], cores=2)


def test_the_report_renders_the_limit_findings_stored_in_the_result():
    from dataclasses import replace

    bare, findings = _with_resources()
    assert [f.kind for f in findings] == ["main-process-bound"]
    text = format_dataloader(replace(bare, limit_findings=tuple(findings)))
    row = [ln for ln in text.splitlines() if ln.startswith("2  ") and "MB" in ln]
    assert row and row[0].rstrip().endswith("main-process-bound")
    assert ("- main-process-bound [workers=2, threads=1]: the training process spends "
            "22.5 ms per batch, 90% of the 25.0 ms a batch takes") in text


def test_the_report_does_not_judge_a_record_without_stored_findings():
    bare, _ = _with_resources()  # what an older file holds: resources, no findings
    text = format_dataloader(bare)
    row = [ln for ln in text.splitlines() if ln.startswith("2  ") and "MB" in ln]
    assert row and row[0].rstrip().endswith("-")
    assert "Why more workers stop helping" not in text


def test_a_user_workload_is_named_by_its_file_not_as_a_dict():
    """A user workload's header names the file its entry points live in, as the user wrote
    it in the config (a raw ``{'init': ...}`` dict is not a name)."""
    from dataclasses import replace

    from pipecheck.report.synthetic import format_synthetic
    from tests.unit.report.test_report import make_result as make_synthetic

    workload = {"init": "path/to/my.py:init", "train_step": "path/to/my.py:train_step",
                "dataset": "path/to/my.py:make_dataset"}
    loader = replace(make_result(), config={"workload": workload})
    assert format_dataloader(loader).splitlines()[0].startswith(
        "pipecheck dataloader: the input pipeline alone (workload path/to/my.py; ")
    synthetic = replace(make_synthetic(), config={"workload": workload})
    assert ["workload", "path/to/my.py"] in [
        line.split() for line in format_synthetic(synthetic).splitlines()]
    two = {"init": "mypkg.model:init", "train_step": "mypkg.model:step",
           "dataset": "/abs/data.py:make"}
    assert format_dataloader(replace(make_result(), config={"workload": two})).startswith(
        "pipecheck dataloader: the input pipeline alone (workload mypkg.model, /abs/data.py; ")
