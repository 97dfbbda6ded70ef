"""One validation pass: a job resolved against the tables, once.

:func:`resolve` checks every name and parameter of a job (also the parts a run does not use:
a ``models:`` entry of a model that is not swept, a budget of a difficulty not run, the
attacks of a scenario not swept), the upper bounds of the sizes memory grows with, and the number
of cells; it builds every model spec and every attack once, per (scenario, attack,
difficulty). Listing the cells (:func:`grb_dist.sweep.cells.run_cells`), the preflight checks and the
memory estimate (:mod:`grb_dist.sweep.preflight`) reuse what it built. No training, no Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from grb_dist.attacks.registry import attack_class, build_attack
from grb_dist.core.bounds import check_budgets, check_model_bounds, check_work_size
from grb_dist.core.errors import ConfigError, GrbDistError
from grb_dist.core.scenario import scenario as scenario_of
from grb_dist.core.scenario import scenarios
from grb_dist.datasets import NORMALIZATIONS
from grb_dist.defenses import at_config, resolve_params
from grb_dist.models.grammar import ModelSpec, check_name, model_config
from grb_dist.sweep.job import JobSpec


@dataclass(frozen=True)
class ResolvedModel:
    """A model or defense of a job: its parsed name, parameters and training overrides."""

    spec: ModelSpec
    params: Mapping[str, Any]
    train: Mapping[str, Any]


@dataclass(frozen=True)
class ResolvedJob:
    """A job whose every name resolved and every parameter set checked.

    Attributes:
        job: the job.
        models: every defense and surrogate of the job (and every ``models:`` entry).
        attacks: ``(scenario, attack, difficulty) -> attack`` of every attack of the swept
            scenarios on every swept difficulty (a poisoning attack: on
            :data:`~grb_dist.core.names.POISONING_DIFFICULTY` alone when it is global, on
            every swept difficulty when the job's poisoning is targeted:
            :meth:`~grb_dist.sweep.job.JobSpec.perturbation_difficulties`), built with the seed
            of repeat 0.
    """

    job: JobSpec
    models: Mapping[str, ResolvedModel]
    attacks: Mapping[tuple[str, str, str], Any]

    def attack(self, scenario: str, name: str, difficulty: str) -> Any:
        return self.attacks[scenario, name, difficulty]


def resolve(job: JobSpec) -> ResolvedJob:
    """Resolve ``job`` against the tables (see the module doc); raises :class:`ConfigError`
    (or another :class:`GrbDistError`) naming the first defect."""
    if job.normalize not in NORMALIZATIONS:
        raise ConfigError(f"unknown normalize {job.normalize!r}; choose one of: {', '.join(NORMALIZATIONS)}")
    check_budgets({"adversarial_training": job.adversarial_training,
                   **{f"{sc.name}.{label}": values for sc in scenarios()
                      for label, values in _labelled(job.section(sc))}})
    models = {}
    for name in dict.fromkeys((*job.models, *job.defenses, *job.surrogates)):
        params, overrides = resolve_params(name, job.models)  # unknown model names and keys raise here
        spec = check_name(name)
        if not spec.uses_train_labels:
            check_model_bounds(name, model_config(name, {k: v for k, v in params.items() if k != "lp"}))
        models[name] = ResolvedModel(spec, params, overrides)
    if job.adversarial_training or any(models[n].spec.adversarial for n in (*job.defenses, *job.surrogates)):
        at_config(job.adversarial_training)
    attacks = {}
    for sc in scenarios():  # every scenario's section, also of a scenario this run does not sweep
        scenario, section = sc.name, job.section(sc)
        for attack in section.attacks:
            cls = attack_class(attack, sc)
            targetable = getattr(cls, "targetable", True)
            swept = job.perturbation_difficulties(sc, targetable)
            # a global poisoning perturbation (a published set) takes no budget of a difficulty but its own
            budgeted = () if sc.poisons and not targetable else tuple(section.budgets)
            for difficulty in dict.fromkeys((*swept, *budgeted)):
                params = job.attack_params(attack, difficulty, job.attack_seed(0), scenario)
                built = _build(attack, params, scenario, difficulty)
                if job.adaptive and adapts(scenario, built) and built.adaptive_defaults:
                    # an adaptive cell's parameters: the attack's defaults under the job's
                    _build(attack, job.attack_params(attack, difficulty, job.attack_seed(0), scenario,
                                                     built.adaptive_defaults), scenario, f"{difficulty}, adaptive")
                if scenario in job.scenarios and difficulty in swept:
                    attacks[scenario, attack, difficulty] = built
    weighted = {attack for (_, attack, _), built in attacks.items() if getattr(built, "edge_gradients", False)}
    for attack in sorted(weighted):  # once per attack and surrogate, not per difficulty
        for s in job.surrogates:
            check_weighted_surrogate(attack, s, models[s].params)
    d, t, s = len(job.difficulties), len(job.defenses), len(job.surrogates)
    n_attacks = sum(len(job.scenario_attacks(sc)) for sc in job.scenarios)  # poisoning: also a cell per difficulty
    check_work_size(len(job.scenarios) * d * t + n_attacks * s * d * job.repeats * t)
    return ResolvedJob(job, models, attacks)


def _labelled(section: Any) -> list[tuple[str, Mapping[str, Any]]]:
    """A scenario section's settings by where they sit (``attack``, ``budgets.full``, ``attacks.fgsm``)."""
    return [("attack", section.attack), *((f"budgets.{d}", b) for d, b in section.budgets.items()),
            *((f"attacks.{a}", p) for a, p in section.attacks.items())]


def check_weighted_surrogate(attack: str, surrogate: str, params: Mapping[str, Any]) -> None:
    """Gradient modification attacks differentiate the surrogate in edge weights: its class
    must declare a weighted program or ``weighted_forward``
    (:func:`~grb_dist.attacks.shared.weighted.edge_weight_reason`). Checked on the
    model built for a tiny graph, before any work."""
    from grb_dist.attacks.shared.weighted import EDGE_WEIGHT_MODELS, edge_weight_reason
    from grb_dist.models.grammar import build_model

    try:
        reason = edge_weight_reason(build_model(surrogate, 3, 2, {k: v for k, v in params.items() if k != "lp"}))
    except (ConfigError, TypeError, ValueError, RuntimeError, NotImplementedError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if reason:
        raise ConfigError(
            f"modification attack {attack} differentiates its surrogate in edge weights, which surrogate "
            f"{surrogate} does not support ({reason}); use a surrogate among: {EDGE_WEIGHT_MODELS}"
        )


def _build(attack: str, params: Mapping[str, Any], scenario: str, where: str) -> Any:
    try:
        return build_attack(attack, params, scenario)
    except GrbDistError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{scenario} attack {attack} ({where}): {exc}") from None


def adapts(scenario: str, attack: Any) -> bool:
    """Whether ``attack`` (built) gets adaptive cells in ``scenario``: an attack that follows
    its surrogate's gradients; in poisoning, one whose gradient runs through the surrogate's
    training (a meta-gradient: ``meta_prbcd``), since the defense is trained after it."""
    return bool(attack.follows_gradients and (not scenario_of(scenario).poisons or getattr(attack, "trains", False)))


def transfer_only(resolved: ResolvedJob, graph: Any) -> dict[tuple[str, str], str]:
    """``(scenario, defense) -> reason`` of the defenses of an adaptive job that its
    gradient attacks cannot differentiate in a swept scenario (they keep their transfer
    cells only); empty for a job without adaptive cells. Each defense is built once on
    ``graph`` (untrained: the answer depends on its class, not its weights)."""
    from grb_dist.attacks.adaptive import transfer_only_reason
    from grb_dist.defenses import build_defense

    job = resolved.job
    if not job.adaptive:
        return {}
    gradient = {s for (s, _, _), attack in resolved.attacks.items() if adapts(s, attack)}
    out = {}
    for name in job.defenses:
        model = build_defense(name, graph, dict(resolved.models[name].params))
        for scenario in job.scenarios:
            reason = transfer_only_reason(model, scenario) if scenario in gradient else None
            if scenario in gradient and scenario_of(scenario).poisons and resolved.models[name].spec.adversarial:
                reason = reason or "adversarial training is not unrolled by a meta-gradient"
            if reason:
                out[scenario, name] = reason
    return out


__all__ = ["ResolvedJob", "ResolvedModel", "adapts", "check_weighted_surrogate", "resolve", "transfer_only"]
