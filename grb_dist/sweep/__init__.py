"""The sweep: job specs and cells (spec), plain work (worker), Ray execution (runner).

Import :mod:`grb_dist.sweep.runner` explicitly: it is the only module that imports Ray.
"""

from grb_dist.sweep.spec import AttackCell, JobSpec, ModelTask, Plan, ScoreCell, apply_overrides, load_job, plan, validate_spec

__all__ = ["AttackCell", "JobSpec", "ModelTask", "Plan", "ScoreCell", "apply_overrides", "load_job", "plan", "validate_spec"]
