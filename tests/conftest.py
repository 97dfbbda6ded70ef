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
