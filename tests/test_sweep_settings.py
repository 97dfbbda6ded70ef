"""RaySettings validation and address checks (no Ray started)."""

from __future__ import annotations

import pytest

from grb_dist.core.errors import ConfigError
from grb_dist.sweep.runner import _partition
from grb_dist.cluster.settings import Connection, FaultTolerance, RaySettings, Scaling
from grb_dist.cluster.settings import check_reachable as _check_reachable


@pytest.mark.parametrize("group, kwargs", [(Connection, {"num_cpus": 0}), (Scaling, {"max_in_flight": -1}),
                                           (Scaling, {"attack_num_cpus": 0}), (Connection, {"memory": 0}),
                                           (Connection, {"num_gpus": -1}), (Scaling, {"workers_per_gpu": -1}),
                                           (FaultTolerance, {"max_restarts": -1})])
def test_settings_rejected(group, kwargs):
    with pytest.raises(ConfigError):
        group(**kwargs)


def test_settings_in_their_groups():
    settings = RaySettings(Connection(num_cpus=2), Scaling(threads=4), FaultTolerance(resubmits=0))
    assert (settings.connection.num_cpus, settings.scaling.threads, settings.faults.resubmits) == (2, 4, 0)
    assert RaySettings().faults == FaultTolerance() and RaySettings().scaling.max_in_flight == 0


def test_address_from_environment(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert RaySettings().resolved_address() == "10.0.0.1:6379"
    assert RaySettings(Connection(address="auto")).resolved_address() == "auto"
    monkeypatch.delenv("RAY_ADDRESS")
    assert RaySettings().resolved_address() is None


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1", "nonsense", "host-without-port"])
def test_unreachable_or_malformed_address(address):
    with pytest.raises(ConfigError):
        _check_reachable(address)


def test_partition_round_robin():
    assert _partition(["a", "b", "c"], 2) == [["a", "c"], ["b"]]
    assert _partition(["a"], 3) == [["a"]]
