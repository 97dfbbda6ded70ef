"""Ray helpers of the sweep layer besides the sweep itself (:mod:`grb_dist.sweep.runner`):
the user registrations carried to the workers, and independent work units run as tasks
(the semantics study). Everything else in grb_dist stays free of Ray.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import ray

from grb_dist import extensions

#: The named actor that holds the driver's registrations for the workers of a Ray job.
HOLDER_PREFIX = "grb-dist-extensions-"
_holder: tuple[str, Any] | None = None  # (actor name, the driver's handle: keeps the actor alive)
_installed_version: int | None = None  # the holder version this worker installed


class _Holder:
    """The actor behind :func:`publish_registrations`: a version counter and the registrations."""

    def __init__(self) -> None:
        self.version = 0
        self.registrations: tuple = ()

    def set(self, registrations: tuple) -> int:
        self.version += 1
        self.registrations = tuple(registrations)
        return self.version

    def get(self) -> tuple[int, tuple]:
        return self.version, self.registrations


def _holder_name() -> str:
    return HOLDER_PREFIX + ray.get_runtime_context().get_job_id()


def publish_registrations() -> None:
    """Driver, with Ray connected: publish this process's registrations
    (:func:`grb_dist.extensions.registered`) to the workers of the current Ray job (a named
    actor with no CPU; nothing happens when there are none). Ray carries them: classes of
    importable modules by reference, others by value; nothing is written to a run."""
    global _holder
    regs = extensions.registered()
    name = _holder_name()
    if _holder is None or _holder[0] != name:  # none yet, or one of an earlier Ray session
        _holder = None
        if not regs:
            return
        holder_cls = ray.remote(num_cpus=0, max_restarts=0)(_Holder)
        _holder = (name, holder_cls.options(name=name, get_if_exists=True).remote())
    ray.get(_holder[1].set.remote(regs))


def install_registrations() -> None:
    """In a Ray worker: install the registrations the driver published when they changed
    since the last call; nothing when none were published."""
    global _installed_version
    if not ray.is_initialized():
        return
    try:
        holder = ray.get_actor(_holder_name())
    except ValueError:  # nothing published for this job
        return
    version, regs = ray.get(holder.get.remote())
    if version != _installed_version:
        extensions.install(regs)
        _installed_version = version


def run_units(fn: Callable[..., Any], work: Iterable[tuple[str, tuple]], on_result: Callable[[int, Any], None],
              *, settings: Any, job_name: str) -> None:
    """Run ``fn(*args)`` for every ``(name, args)`` of ``work`` as a Ray task (one CPU, two
    retries) on the cluster of ``settings`` (:class:`~grb_dist.sweep.runner.RaySettings`, a
    local Ray when it names none, stopped afterwards) and hand each result to
    ``on_result(index, result)`` in the driver as soon as it is ready."""
    from grb_dist.sweep.runner import connect, disconnect

    context = connect(settings, job_name=job_name)
    try:
        task = ray.remote(num_cpus=1, max_retries=2)(fn)
        refs = {task.options(name=name).remote(*args): i for i, (name, args) in enumerate(work)}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            on_result(refs.pop(ready[0]), ray.get(ready[0]))
    finally:
        disconnect(context)


__all__ = ["install_registrations", "publish_registrations", "run_units"]
