"""Session-wide fixtures: one small real local Ray (2 CPUs) shared by the sweep tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray with 2 CPUs, started once per session and shut down at its end."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started = False
    if not ray.is_initialized():
        # address="local": always a fresh private Ray, never one another process started here
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        started = True
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op torch thread for a test module whose graphs are tiny (threads gain
    nothing there and lose much on a shared machine); restored after the module."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------------- real datasets

def _real(relative: str):
    """The path of a real test graph (:func:`helpers.find_data`). Missing, the test is
    skipped with how to provide it; under CI (``CI=true``) it fails instead, so CI never
    goes green by skipping."""
    from helpers import DATA_ENV, data_folders, find_data

    path = find_data(relative)
    if path is None:
        looked = ", ".join(str(f) for f in data_folders())
        reason = (f"real test graph {relative!r} not found (looked in {looked}); set {DATA_ENV} to a folder "
                  f"holding {relative} (CONTRIBUTING.md, 'Test data')")
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def cora_legacy():
    """Cora in the official GRB file layout (adj.npz, features.npz, labels.npz, index.npz)."""
    from helpers import CORA_LEGACY

    return _real(CORA_LEGACY)


@pytest.fixture(scope="session")
def npz_dir():
    """The folder of ``.npz`` graphs (cora, citeseer, cora_ml, polblogs)."""
    from helpers import NPZ

    return _real(NPZ)


@pytest.fixture(scope="session")
def prognn_dir():
    """Pro-GNN's published perturbations (meta/, nettack/, splits/), the npz/ folder beside it."""
    from helpers import PROGNN

    return _real(PROGNN)
