"""The work measures (observe/work.py) as Prometheus exports them."""

from prometheus_client import CollectorRegistry, generate_latest

from tokenward.observe.telemetry import Telemetry
from tokenward.observe.work import WorkMetrics


def test_work_measures_are_exported_with_a_retry_after_histogram():
    work = WorkMetrics()
    work.refused("t1", 500, terminal=False, retry_after=3, job=False)
    work.refused("t1", 900, terminal=False, retry_after=120, job=True)
    work.refused("t1", 100, terminal=True, retry_after=None, job=True)
    work.job_request("t1", "admitted")
    work.job_request("t1", "completed", charged=42)
    work.job_event("t1", "created")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(work)
    text = generate_latest(registry).decode()
    assert 'tokenward_refused_work_tokens_total{kind="retryable",tenant="t1"} 1400.0' in text
    assert 'tokenward_admission_refusals_total{kind="terminal",tenant="t1"} 1.0' in text
    assert 'tokenward_retry_after_seconds_bucket{le="5",tenant="t1"} 1.0' in text
    assert 'tokenward_retry_after_seconds_bucket{le="+Inf",tenant="t1"} 2.0' in text
    assert 'tokenward_retry_after_seconds_sum{tenant="t1"} 123.0' in text
    assert 'tokenward_job_requests_total{outcome="refused_terminal",tenant="t1"} 1.0' in text
    assert 'tokenward_job_requests_total{outcome="refused_retryable",tenant="t1"} 1.0' in text
    assert 'tokenward_job_spent_tokens_total{tenant="t1"} 42.0' in text
    assert 'tokenward_jobs_total{event="created",tenant="t1"} 1.0' in text


def test_a_gateways_scrape_reads_its_own_work_measures_and_no_other_gateways():
    """Two gateways in one process count apart (observe/telemetry.py): nothing module-level."""
    one, other = Telemetry(), Telemetry()
    one.work.job_event("t1", "created")
    assert b'tokenward_jobs_total{event="created",tenant="t1"} 1.0' in generate_latest(one.exposition.registry)
    assert b'tenant="t1"' not in generate_latest(other.exposition.registry)
