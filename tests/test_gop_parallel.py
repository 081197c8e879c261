"""GOP relaxed duals solved through executors: ProcessPoolExecutor and dask.distributed.

The subproblem payloads are plain numpy/scipy objects, so any ``concurrent.futures.Executor``
works unchanged; the certified optimum must equal the serial one.
"""
import concurrent.futures as cf

import numpy as np
import pytest

from varopt.registry import get_solver
from test_gop import bgmm_like

X = np.array([-2.0, -1.0, 2.0])


@pytest.fixture(scope="module")
def serial():
    return get_solver("gop").solve(bgmm_like(X))


def test_process_pool_matches_serial(serial):
    with cf.ProcessPoolExecutor(max_workers=2) as ex:
        res = get_solver("gop").solve(bgmm_like(X), executor=ex)
    assert res.status == serial.status == "optimal"
    assert abs(res.objective - serial.objective) <= 2e-6 * abs(serial.objective)
    assert res.lower_bound <= serial.objective + 1e-6 * abs(serial.objective)


def test_thread_pool_matches_serial(serial):
    with cf.ThreadPoolExecutor(max_workers=2) as ex:
        res = get_solver("gop").solve(bgmm_like(X), executor=ex)
    assert res.status == "optimal"
    assert abs(res.objective - serial.objective) <= 2e-6 * abs(serial.objective)


def test_dask_executor_matches_serial(serial):
    distributed = pytest.importorskip("dask.distributed", reason="dask.distributed is not installed")
    try:
        client = distributed.Client(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None,
                                    silence_logs=50)
    except Exception as exc:  # pragma: no cover - environment dependent
        pytest.skip(f"dask could not start a local cluster: {exc!r}")
    try:
        res = get_solver("gop").solve(bgmm_like(X), executor=client.get_executor())
    finally:
        client.close()
    assert res.status == "optimal"
    assert abs(res.objective - serial.objective) <= 2e-6 * abs(serial.objective)


def test_process_pool_reused_across_solves(serial):
    # workers keep a relaxed-dual model per solve (key); a second solve in the same pool must not
    # reuse the first one's rows
    other = np.array([-1.5, 0.0, 2.5])
    ref = get_solver("gop").solve(bgmm_like(other))
    with cf.ProcessPoolExecutor(max_workers=2) as ex:
        r1 = get_solver("gop").solve(bgmm_like(X), executor=ex)
        r2 = get_solver("gop").solve(bgmm_like(other), executor=ex)
    assert r1.status == r2.status == "optimal"
    assert abs(r1.objective - serial.objective) <= 2e-6 * abs(serial.objective)
    assert abs(r2.objective - ref.objective) <= 2e-6 * abs(ref.objective)
    assert r2.lower_bound <= ref.objective + 1e-6 * abs(ref.objective)
