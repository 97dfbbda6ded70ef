"""The command-line overrides of a job (``--attacks``, ``--n-inject 20,40`` ...) and the
budget axis they can make: a changed copy of a :class:`~grb_dist.sweep.job.JobSpec`."""

from __future__ import annotations

from typing import Any

from grb_dist.attacks.registry import BUDGET_SEP, attack_class, attack_registry, base_attack_name
from grb_dist.core.bounds import MAX_BUDGETS
from grb_dist.core.errors import ConfigError
from grb_dist.core.names import normalize_name
from grb_dist.core.scenario import ALL, scenarios
from grb_dist.core.scenario import scenario as scenario_of
from grb_dist.sweep.job import JobSpec, parse_job, swept


def _split(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    if not items:
        raise ConfigError(f"expected a comma-separated list, got {value!r}")
    return items


#: The command-line flag of each budget override (for error messages).
_BUDGET_FLAGS = {"n_inject": "--n-inject", "ratio_edge_mod": "--ratio-edge-mod"}


def _number(item: Any, key: str) -> int | float:
    """A budget value as a number: an integer for ``n_inject``, a float for ``ratio_edge_mod``."""
    text = str(item).strip()
    if isinstance(item, bool):
        raise ConfigError(f"{_BUDGET_FLAGS[key]}: {text!r} is not a number")
    if key == "n_inject":
        if isinstance(item, int):
            return item
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{_BUDGET_FLAGS[key]}: {text!r} is not an integer") from None
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{_BUDGET_FLAGS[key]}: {text!r} is not a number") from None


def _budget_value(item: Any, key: str) -> int | float:
    """One value of a budget list: a positive integer (``n_inject``) or a share in (0, 1]
    (``ratio_edge_mod``)."""
    value = _number(item, key)
    if key == "n_inject" and value < 1:
        raise ConfigError(f"{_BUDGET_FLAGS[key]}: {item!r} is not a positive integer")
    if key == "ratio_edge_mod" and not 0.0 < value <= 1.0:  # also rejects nan
        raise ConfigError(f"{_BUDGET_FLAGS[key]}: {item!r} is not a number in (0, 1]")
    return value


def budget_values(value: Any, key: str) -> tuple[int | float, ...] | None:
    """The values of a budget override ``key`` (``n_inject`` or ``ratio_edge_mod``).

    A single value (a number, or a string holding one) is kept as it was before lists
    existed: parsed, then checked by the job's validation. A comma-separated string or a
    sequence of several values gives each value checked (positive integers for
    ``n_inject``, shares in (0, 1] for ``ratio_edge_mod``), at most :data:`MAX_BUDGETS` of
    them, none twice.
    """
    if value is None:
        return None
    if isinstance(value, str):
        items: tuple[Any, ...] = tuple(v.strip() for v in value.split(","))
    elif isinstance(value, (list, tuple)):
        items = tuple(value)
    else:
        return (value,)
    flag = _BUDGET_FLAGS[key]
    if not items or any(isinstance(v, str) and not v for v in items):
        raise ConfigError(f"{flag}: expected a value or a comma-separated list of values, got {value!r}")
    if len(items) == 1:
        return (_number(items[0], key),)
    if len(items) > MAX_BUDGETS:
        raise ConfigError(f"{flag}: at most {MAX_BUDGETS} values, got {len(items)}")
    values = tuple(_budget_value(v, key) for v in items)
    twice = [v for i, v in enumerate(values) if v in values[:i]]
    if twice:
        raise ConfigError(f"{flag} lists {twice[0]} twice")
    return values


def budget_label(value: int | float) -> str:
    """How a budget appears in a budget-axis attack name: ``20``, ``0.05``."""
    return str(value) if isinstance(value, int) else repr(float(value))


def _budget_axis(section: dict[str, Any], key: str, values: tuple[int | float, ...]) -> None:
    """Replace every attack of ``section["attacks"]`` by one entry per budget,
    ``<attack>@<value>``, with the attack's parameters and ``key`` set to the value."""
    axis: dict[str, Any] = {}
    for name, entry in section.get("attacks", {}).items():
        base = base_attack_name(name)
        for v in values:
            axis[f"{base}{BUDGET_SEP}{budget_label(v)}"] = {**(entry or {}), key: v}
    section["attacks"] = axis


def apply_overrides(
    spec: JobSpec,
    *,
    dataset: str | None = None,
    scenario: str | None = None,
    attacks: str | tuple[str, ...] | None = None,
    defenses: str | tuple[str, ...] | None = None,
    surrogates: str | tuple[str, ...] | None = None,
    difficulties: str | tuple[str, ...] | None = None,
    repeats: int | None = None,
    seed: int | None = None,
    n_inject: int | str | tuple[int, ...] | None = None,
    edges_per_node: int | None = None,
    steps: int | None = None,
    ratio_edge_mod: float | str | tuple[float, ...] | None = None,
    adaptive: bool | None = None,
) -> JobSpec:
    """Narrow or override a job (the CLI flags). Lists may be comma-separated strings.

    ``scenario`` picks ``injection``, ``modification``, ``poisoning`` or ``all``. ``--attacks`` keeps, in
    every scenario swept, the named attacks that scenario knows, with the job's parameters
    (attacks the job does not list run with defaults; ``pgd`` names the PGD of every swept scenario that has one); a
    name no swept scenario knows is an error. ``n_inject`` / ``edges_per_node`` / ``steps``
    replace the value in the shared attack section and in every ``budgets`` and ``attacks``
    entry of the scenarios that inject nodes (``steps`` in every scenario);
    ``ratio_edge_mod`` likewise in the scenarios that flip edges (``modification:``,
    ``poisoning:``).

    ``n_inject`` and ``ratio_edge_mod`` may list several values (``"20,40,60"``; see
    :func:`budget_values`): that scenario's attacks then become a budget axis, one entry
    ``<attack>@<value>`` per attack and value with the attack's parameters and the budget
    replaced (``fgsm@20``, ``prbcd@0.05``), each ranked on its own. One value keeps the
    attack names, and so every cell id. ``adaptive`` switches the adaptive cells on or off.
    """
    data = spec.to_dict()
    if dataset is not None:
        data["dataset"] = str(dataset)
    if scenario is not None:
        data["scenario"] = scenario if scenario == ALL else scenario_of(scenario).name
    if isinstance(attacks, str):
        attacks = _split(attacks)
    if attacks is not None:
        _select_attacks(spec, data, tuple(normalize_name(a) for a in attacks))
    for key, value in (("defenses", defenses), ("surrogates", surrogates), ("difficulties", difficulties)):
        if isinstance(value, str):
            value = _split(value)
        if value is not None:
            data[key] = list(value)
    if repeats is not None:
        data["repeats"] = repeats
    if seed is not None:
        data["seed"] = seed
    if adaptive is not None:
        data["adaptive"] = adaptive
    # an injection's budget goes to the scenarios that inject nodes, a share of edges to those that flip them
    nodes = tuple(data.setdefault(s.name, {}) for s in scenarios() if s.injects)
    edges = tuple(data.setdefault(s.name, {}) for s in scenarios() if not s.injects)
    n_injects, ratios = budget_values(n_inject, "n_inject"), budget_values(ratio_edge_mod, "ratio_edge_mod")
    n_inject = n_injects[0] if n_injects and len(n_injects) == 1 else None
    ratio_edge_mod = ratios[0] if ratios and len(ratios) == 1 else None
    for axis, values, sections in (("n_inject", n_injects, nodes), ("ratio_edge_mod", ratios, edges)):
        if values and len(values) > 1:
            for sec in sections:
                _budget_axis(sec, axis, values)
    for key, value, sections in (("n_inject", n_inject, nodes), ("edges_per_node", edges_per_node, nodes),
                                 ("steps", steps, nodes + edges), ("ratio_edge_mod", ratio_edge_mod, edges)):
        if value is None:
            continue
        for sec in sections:
            sec.setdefault("attack", {})[key] = value
            for name in ("budgets", "attacks"):
                for entry in sec.get(name, {}).values():
                    if key in entry:
                        entry[key] = value
    return parse_job(data, where="job")


def _select_attacks(spec: JobSpec, data: dict[str, Any], names: tuple[str, ...]) -> None:
    """Narrow every swept scenario's attacks to ``names`` (see :func:`apply_overrides`)."""
    scenarios_swept = swept(data.get("scenario", spec.scenario), spec)
    known = set()
    for scenario in scenarios_swept:
        registry = attack_registry(scenario)
        mine = [n for n in names if n in registry]
        known.update(mine)
        own = spec.scenario_attacks(scenario)
        chosen = {registry.canonical(n): dict(own.get(registry.canonical(n), {})) for n in mine}
        listed = [n for n in names if BUDGET_SEP in n and n in own]  # a job's own <attack>@<value> entries
        known.update(listed)
        chosen.update({n: dict(own[n]) for n in listed})
        data.setdefault(scenario, {})["attacks"] = chosen
    unknown = [n for n in names if n not in known]
    if unknown and BUDGET_SEP in unknown[0]:
        raise ConfigError(
            f"--attacks {unknown[0]}: the job has no attack {unknown[0]}; <attack>@<value> entries come from a "
            f"budget list, e.g. --attacks {base_attack_name(unknown[0])} --n-inject 20,40 "
            "(or --ratio-edge-mod 0.01,0.05)"
        )
    if unknown:
        for scenario in scenarios_swept:  # another scenario's attack, or an unknown name
            attack_class(unknown[0], scenario)


__all__ = ["MAX_BUDGETS", "apply_overrides", "budget_label", "budget_values"]
