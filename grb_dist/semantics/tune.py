"""Per-K hyper-parameter search of a study's models (Gosch et al. 2023, appendix H).

The paper tunes every model for every K on 10 sampled graphs and keeps, per K, the
setting with the best average validation accuracy; Model+LP variants take the best
setting of the model and the best of LP. :func:`tune` does the same on a grid given in the
job's ``search:`` section::

    search:
      gcn: {dropout: [0.0, 0.3, 0.5], lr: [0.01, 0.001]}
      lp: {alpha: [0.5, 0.7, 0.9]}

Keys are the model's hyper-parameters, plus ``lr`` and ``weight_decay`` (training
settings; the section's grid and checks: :mod:`grb_dist.semantics.search`). Each candidate
(K, model, setting) is trained on ``graphs`` graphs (the study's own graph seeds, so the
validation nodes are the study's) and scored by its mean best validation accuracy; the
result is the job's ``per_K`` section (:func:`per_k_section`), which ``grb-dist study-tune``
writes into a copy of the job. Candidates run as Ray tasks, like the study's units.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any, Callable, Mapping

import pandas as pd

from grb_dist.core.text import plural
from grb_dist.semantics.cache import UnitCache, worker_cache
from grb_dist.semantics.data import prepare
from grb_dist.semantics.kernel import train_study_model
from grb_dist.semantics.search import check_search, grid, model_entry
from grb_dist.semantics.spec import StudySpec


def candidates(spec: StudySpec, search: Mapping[str, Any]) -> list[tuple[float, str, dict[str, Any]]]:
    """Every (K, model, setting) to score."""
    return [(float(k), str(m), s) for k in spec.K for m, options in search.items() for s in grid(options)]


def check_tune(spec: StudySpec, search: Mapping[str, Any], graphs: int) -> None:
    """Errors before any work: the ``search`` grids (:func:`check_search`), ``graphs`` in
    the study's range, the number of trainings bounded like a sweep's cells, and the largest
    setting's training within this machine's memory."""
    from grb_dist.core.bounds import check_int, check_work_size
    from grb_dist.semantics.spec import MAX_GRAPHS, check_study_memory, study_memory

    check_search(spec, search)
    check_int(graphs, "graphs", 1, MAX_GRAPHS, hint="each setting is trained once per graph")
    settings = sum(math.prod(len(v) for v in options.values()) for options in search.values())
    check_work_size(len(spec.K) * settings * graphs, hint="search fewer values, fewer K or fewer graphs",
                    what="trainings")
    models = [(str(m), model_entry(spec.models_at(k).get(str(m), {}), s)) for k, m, s in candidates(spec, search)]
    check_study_memory([t for t in study_memory(spec, models=models) if t.task.startswith(("the graph", "training"))])


def score(spec_dict: dict, K: float, model: str, setting: dict, graphs: int,
          cache: UnitCache | None = None) -> float:
    """Mean best validation accuracy of ``model`` with ``setting`` at ``K`` over the study's
    first ``graphs`` graph seeds (a plain function; the Ray task of :func:`tune`). With a
    ``cache``, candidates share the sampled graphs."""
    spec = StudySpec(**spec_dict)
    models = spec.models_at(K)
    models[model] = model_entry(models.get(model, {}), setting)
    trial = replace(spec, models=models, per_K={})
    accs = []
    for seed in range(spec.seed, spec.seed + graphs):
        prepared = prepare(spec, K, seed, cache)
        _, acc = train_study_model(trial, prepared, model, seed)
        accs.append(acc)
    return float(sum(accs) / len(accs))


def _score_task(spec_dict: dict, K: float, model: str, setting: dict, graphs: int) -> float:
    """:func:`score` as a Ray task: the candidates a worker process runs share its cache."""
    return score(spec_dict, K, model, setting, graphs, worker_cache())


def tune(spec: StudySpec, search: Mapping[str, Any], *, graphs: int, address: str | None = None,
         num_cpus: int | None = None, use_ray: bool = True,
         progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Score every candidate; returns one row per (K, model, setting) with ``val_accuracy``
    and ``best`` (the best setting of each (K, model))."""
    check_tune(spec, search, graphs)
    todo = candidates(spec, search)
    say = progress or (lambda _msg: None)
    say(f"study-tune {spec.study}: {plural(len(todo), 'setting')} x {plural(graphs, 'graph')}")
    results: list[float] = [math.nan] * len(todo)
    spec_dict = asdict(spec)
    if use_ray:
        from grb_dist.cluster.settings import Connection, RaySettings
        from grb_dist.cluster.ray_edge import run_units

        done = [0]

        def on_result(i: int, value: float) -> None:
            results[i] = value
            done[0] += 1
            k, m, s = todo[i]
            say(f"[{done[0]}/{len(todo)}] K={k:g} {m} {s}: {value:.3f}")

        run_units(_score_task, [(f"tune {m} K={k:g}", (spec_dict, k, m, s, graphs)) for k, m, s in todo], on_result,
                  settings=RaySettings(Connection(address=address, num_cpus=num_cpus, include_dashboard=False)),
                  job_name=f"grb-dist study-tune {spec.study}")
    else:
        cache = UnitCache()
        for i, (k, m, s) in enumerate(todo):
            results[i] = score(spec_dict, k, m, s, graphs, cache)
            say(f"[{i + 1}/{len(todo)}] K={k:g} {m} {s}: {results[i]:.3f}")
    table = pd.DataFrame({"K": [k for k, _, _ in todo], "model": [m for _, m, _ in todo],
                          "setting": [s for _, _, s in todo], "val_accuracy": results})
    best = table.groupby(["K", "model"], sort=False)["val_accuracy"].transform("max")
    first = table[table["val_accuracy"] == best].drop_duplicates(["K", "model"]).index
    table["best"] = table.index.isin(first)
    return table


def per_k_section(spec: StudySpec, table: pd.DataFrame) -> dict[float, dict[str, dict[str, Any]]]:
    """The job's ``per_K`` from :func:`tune`'s table: each tuned model's best setting, and
    for each ``<model>_lp`` of the study the best of ``<model>`` with lp's best ``alpha``
    (and other lp settings) under ``lp:``. Settings already in ``per_K`` are kept unless
    tuned."""
    out: dict[float, dict[str, dict[str, Any]]] = {}
    names = [str(m) for m in spec.models]
    for k in spec.K:
        entries = {str(m): dict(v) for m, v in next(
            (v for kk, v in spec.per_K.items() if math.isclose(float(kk), float(k))), {}).items()}
        best = table[(table["K"] == k) & table["best"]]
        chosen = {row.model: model_entry({}, row.setting) for row in best.itertuples()}
        entries.update({m: {**entries.get(m, {}), **e} for m, e in chosen.items()})
        lp_best = chosen.get("lp")
        for name in names:
            if not name.endswith("_lp"):
                continue
            merged = dict(entries.get(name, {}))
            if name[:-3] in chosen:
                merged.update(chosen[name[:-3]])
            if lp_best:
                current = dict(spec.models_at(k).get(name, {}).get("lp", {}) or {})
                merged["lp"] = {**current, **{key: v for key, v in lp_best.items() if key != "train"}}
            if merged:
                entries[name] = merged
        if entries:
            out[float(k)] = entries
    return out


def tuned_job(data: Mapping[str, Any], spec, table: pd.DataFrame, graphs: int) -> str:
    """The YAML text of a tuned study job: the job's own mapping ``data`` (as read from its
    file) with :func:`per_k_section` of :func:`tune`'s ``table`` merged into its ``per_K``
    (tuned entries replace those of the same K), headed by a comment naming the study and
    ``graphs``, the graphs per K it was tuned on. Every entry is written out (no YAML
    anchors or aliases)."""
    import yaml

    per_k = per_k_section(spec, table)
    tuned = {**data, "per_K": {**{float(x): v for x, v in (data.get("per_K") or {}).items()}, **per_k}}
    header = f"# {spec.study} tuned by grb-dist study-tune ({plural(graphs, 'graph')} per K)\n"

    class NoAliases(yaml.SafeDumper):  # every entry written out, no &id001 / *id001
        def ignore_aliases(self, data):
            return True

    return header + yaml.dump(tuned, Dumper=NoAliases, sort_keys=False)


__all__ = ["candidates", "check_tune", "per_k_section", "score", "tune", "tuned_job"]
