"""``sweep --plan``: the cost of a prepared run's missing cells on a cluster, before it runs.

:func:`predict_cost` calibrates on this machine (:mod:`~grb_dist.sweep.cost.calibrate`) and
prices the run's work with the cost model (:mod:`~grb_dist.sweep.cost.forecast`). Reads the
run directory; writes nothing there.
"""

from __future__ import annotations

from typing import Any

from grb_dist.core.errors import ConfigError
from grb_dist.store import RunStore
from grb_dist.sweep.cost.calibrate import calibrate, gpu_machine
from grb_dist.sweep.cost.forecast import forecast
from grb_dist.sweep.session import Prepared, pending_work


def predict_cost(prepared: Prepared, cluster: Any, *, load_seconds: float = 0.0, gpu_kind: str | None = None,
                 dashboard: bool | None = None, on_step=None, sample: str = "auto", budget: float | None = None) -> Any:
    """``sweep --plan``: the :class:`~grb_dist.sweep.cost.forecast.Forecast` of the missing cells
    of a prepared run on ``cluster`` (a :class:`~grb_dist.sweep.cost.forecast.Cluster`), from a
    calibration on this machine (its CUDA device when the cluster has GPUs and this machine
    has one), or, with ``gpu_kind``, from the cached calibration of a GPU of that kind.
    Reads the run directory; writes nothing there (the calibration cache lives in the
    user's cache directory). ``dashboard``: whether the sweep's local Ray would start its
    dashboard (``None``: Ray's choice), which its start-up time depends on."""
    import torch

    p = prepared.cells
    work = pending_work(prepared)
    store = RunStore.existing(prepared.run_dir) if prepared.resume else None
    stored = frozenset(t.file_stem for t in work.models if store is not None and store.has_model(t.file_stem, t.model_id))
    here_gpu = torch.cuda.is_available()
    machine = gpu_machine(gpu_kind, cluster.threads) if gpu_kind and not (
        here_gpu and gpu_kind.lower() in torch.cuda.get_device_name(0).lower()) else None
    device = "cuda" if cluster.gpus and here_gpu and machine is None else "cpu"
    if cluster.gpus and device == "cpu" and machine is None:
        raise ConfigError("this machine has no GPU to calibrate a GPU cluster on: name the cluster's GPU with "
                          "--gpu-kind (its calibration cached from a GPU node), or plan for CPUs (--gpus 0)")
    calibration = calibrate(p, work, prepared.graph, prepared.fingerprint, device=device, threads=cluster.threads,
                            cpus=int(cluster.cpus), dashboard=dashboard, on_step=on_step, machine=machine,
                            sample=sample, budget=budget)
    g = prepared.graph
    graph_bytes = int(g.features.nbytes + g.edge_index.nbytes + g.labels.nbytes)

    def priced(cal: Any) -> Any:
        return forecast(p, work, cal, cluster, load_seconds=load_seconds, graph_bytes=graph_bytes, stored=stored)

    fc = priced(calibration)
    if calibration.bounds:
        low, high = (priced(side) for side in calibration.bounds)
        fc.bounds = (min(low.total, fc.total), max(high.upper, fc.upper))
    return work, calibration, fc


__all__ = ["predict_cost"]
