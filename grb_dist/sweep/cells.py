"""The cells of a sweep: every model task, attack cell and score cell of a job.

* :class:`ModelTask` -- one training task per (model or defense, seed). Targets (the
  defenses) are trained with ``seed``; surrogates with ``seed + SURROGATE_SEED_OFFSET`` so
  that the attacker never holds a copy of a target (black-box transfer).
* :class:`AttackCell` -- one perturbation per (attack, surrogate, difficulty, repeat); the
  attack seed of repeat ``r`` is ``seed + ATTACK_SEED_STRIDE * (r + 1)``.
* :class:`ScoreCell` -- one accuracy per (perturbation, defense), plus one clean row
  (attack ``none``, surrogate ``none``) per (defense, difficulty). The clean accuracy of a
  trained defense is deterministic, so it is computed once, stored with ``repeat = 0``, and
  the leaderboards use it for every repeat.

Those are the ``transfer`` cells (GRB's black-box protocol). A job with ``adaptive: true``
adds ``adaptive`` cells: per (defense, gradient attack of the scenario, difficulty, repeat)
one perturbation generated with the defense itself as the surrogate (white-box, the same
parameters and audit), scored on that defense only; their surrogate column names the
defense. The labels it fights are the predictions of the attacker's first surrogate, as
in its transfer attacks (the attacker has no test labels). A defense whose program an attack cannot differentiate gets no adaptive cells in
that scenario (``transfer_only``, with the reason). Adaptive ids hash the threat too, and
transfer ids are what they were, so switching adaptive on grows a run by its adaptive cells.

The poisoning scenario (``docs/poisoning.md``) is laid out otherwise: a perturbation is global,
one per (attack, surrogate, repeat), keyed under difficulty
:data:`~grb_dist.core.names.POISONING_DIFFICULTY`; every defense is then trained on it
(transductively, with its own seed) and scored on every difficulty: a :class:`PoisonTask`
per (perturbation, defense), whose model is stored like any other
(``models/<defense>-<seed>-<perturbation id>.pt``). Its clean rows come from a
:class:`PoisonTask` on the clean graph (the same transductive training, no perturbation).
A job with ``poisoning.budgets`` is targeted: a perturbation per difficulty as in evasion
(``AttackCell.targeted``), fighting that difficulty's test nodes, scored on it alone.

A per-target scenario (``targeted``, ``targeted-poisoning``: ``docs/targeted.md``) keeps
these layouts (evasion's, poisoning's per difficulty) with one difference: a perturbation
holds every target's own flips, chosen by the job's target selection, which every id of the
scenario hashes; a targeted-poisoning :class:`PoisonTask` trains its defense once per target.

Every id is the sha256 of the canonical JSON of the full configuration it depends on, so an
id changes exactly when something that influences its result changes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

from grb_dist.attacks.registry import attack_class
from grb_dist.core.config import canonical_json, to_dict
from grb_dist.core.errors import ConfigError
from grb_dist.core.names import ADAPTIVE, CLEAN, TRANSFER
from grb_dist.core.scenario import DEFAULT, Scenario
from grb_dist.core.scenario import scenario as scenario_of
from grb_dist.core.targeted import TargetSelection
from grb_dist.sweep.job import SURROGATE_SEED_OFFSET, JobSpec, content_hash
from grb_dist.sweep.resolve import ResolvedJob, adapts, resolve


#: At most this many attack cells (same surrogate and difficulty) run in one task.
ATTACK_BATCH = 4


@dataclass(frozen=True)
class ModelTask:
    """Train one model: a defense (``role="target"``), a surrogate (``role="surrogate"``) or
    a defense on a poisoned graph (``role="poisoned"``, ``tag``: what it was trained on)."""

    role: Literal["target", "surrogate", "poisoned"]
    name: str
    seed: int
    params: Mapping[str, Any]
    train: Mapping[str, Any]
    at: Mapping[str, Any] | None
    model_id: str
    tag: str = ""
    #: trained on the whole graph (a poisoning attacker's surrogate, a poisoned defense)
    transductive: bool = False

    @property
    def file_stem(self) -> str:
        """``<name>-<seed>`` (``-<tag>`` for a poisoned model): the state_dict lives at
        ``models/<file_stem>.pt``."""
        return f"{self.name}-{self.seed}" + (f"-{self.tag}" if self.tag else "")


@dataclass(frozen=True)
class PoisonTask:
    """Train one defense on one poisoned graph (``perturbation_id``; ``None``: the clean
    graph, for the clean rows) and score it on every difficulty (``cells``)."""

    model: ModelTask
    perturbation_id: str | None
    cells: tuple["ScoreCell", ...]
    #: a per-target scenario's choice of targets: the defense is trained on each target's
    #: perturbation alone and scored at that target (clean: trained once, scored at them)
    selection: TargetSelection | None = None


@dataclass(frozen=True)
class AttackCell:
    """One perturbation: (attack, surrogate, difficulty, repeat)."""

    attack: str
    surrogate: str
    difficulty: str
    repeat: int
    seed: int
    params: Mapping[str, Any]
    surrogate_model: str  # file stem of the surrogate
    perturbation_id: str
    scenario: str = DEFAULT.name
    threat: str = TRANSFER
    #: file stem of the model whose predictions the attack fights (adaptive cells: the
    #: attacker's first surrogate); ``None``: the attacked model's own
    labels_from: str | None = None
    #: a poisoning perturbation that fights its difficulty's test nodes (targeted poisoning),
    #: not every unlabelled node
    targeted: bool = False
    #: the files the attack reads beside the graph, by content: ``(path in its layout,
    #: sha256)`` pairs (a published set's matrix and attacked-node list), in the id too
    inputs: tuple[tuple[str, str], ...] = ()
    #: a per-target scenario's choice of targets within the difficulty (in the id too)
    selection: TargetSelection | None = None

    @property
    def steps(self) -> int:
        """The attack's ``steps``: the job's setting, else its config's default (meta-PR-BCD
        runs 100 search steps where the job sets none), 0 for an attack without."""
        if "steps" in self.params:
            return int(self.params["steps"] or 0)
        default = getattr(attack_class(self.attack, self.scenario).Config, "__dataclass_fields__", {}).get("steps")
        return int(default.default or 0) if default is not None and isinstance(default.default, int) else 0

    @property
    def gradient_steps(self) -> int:
        """The optimisation steps the attack takes: its ``steps``, or 0 for an attack that
        follows no gradients (RND takes a ``steps`` setting from its section and ignores it)
        or whose length ``steps`` does not set (Metattack: ``runs_steps``)."""
        from grb_dist.attacks import build_attack

        attack = build_attack(self.attack, dict(self.params), self.scenario) if self.steps else None
        return self.steps if attack is not None and attack.follows_gradients and attack.runs_steps else 0


@dataclass(frozen=True)
class ScoreCell:
    """One row of ``scores/``: a perturbation (or none) against one defense."""

    cell_id: str
    attack: str
    surrogate: str
    defense: str
    difficulty: str
    repeat: int
    seed: int
    defense_model: str  # file stem of the defense
    perturbation_id: str | None
    scenario: str = DEFAULT.name
    threat: str = TRANSFER

    @property
    def per_target(self) -> bool:
        """Whether it is a per-target scenario's row (scored at its targets, each alone)."""
        return scenario_of(self.scenario).per_target

    @property
    def trained_on_perturbation(self) -> bool:
        """Whether its defense is trained on the perturbed graph (a poisoning scenario's cell,
        scored by its own training task, not by the Scorers)."""
        return scenario_of(self.scenario).poisons


@dataclass(frozen=True)
class Cells:
    """Everything a sweep computes, with content-hashed ids."""

    spec: JobSpec
    config_hash: str
    targets: tuple[ModelTask, ...]
    surrogates: tuple[ModelTask, ...]
    attacks: tuple[AttackCell, ...]
    scores: tuple[ScoreCell, ...]
    #: ``(scenario, defense) -> reason`` of the defenses without adaptive cells there
    transfer_only: Mapping[tuple[str, str], str] = field(default_factory=dict)
    #: the poisoning scenario's trainings (clean and poisoned), their cells in ``scores``
    poisoned: tuple[PoisonTask, ...] = ()

    @property
    def models(self) -> tuple[ModelTask, ...]:
        return self.targets + self.surrogates

    @property
    def trainings(self) -> tuple[ModelTask, ...]:
        """Every training of the cells: the models, then the poisoning scenario's (a defense's
        on the clean graph, ``<defense>-<seed>-clean``, and on each poisoned graph), which
        :attr:`models` does not hold."""
        return (*self.models, *(pt.model for pt in self.poisoned))


def _model_task(resolved: ResolvedJob, fingerprint: str, role: str, name: str, seed: int) -> ModelTask:
    spec, model = resolved.job, resolved.models[name]
    params = dict(model.params)
    train = {**to_dict(spec.train), **model.train}
    at = spec.adversarial_training if model.spec.adversarial else None
    ident = {
        "dataset": fingerprint, "normalize": spec.normalize, "data_seed": spec.seed,
        "name": name, "seed": seed, "params": params, "train": train, "at": at,
    }
    return ModelTask(role, name, seed, params, train, at, content_hash(ident))  # type: ignore[arg-type]


def run_cells(job: JobSpec | ResolvedJob, fingerprint: str,
              transfer_only: Mapping[tuple[str, str], str] | None = None,
              inputs: Mapping[tuple[str, str, str], Mapping[str, str]] | None = None) -> Cells:
    """All model tasks, attack cells and score cells of a job (resolved with
    :func:`~grb_dist.sweep.resolve.resolve` when given a :class:`JobSpec`) on the dataset
    whose content fingerprint is ``fingerprint`` (:func:`grb_dist.store.graph_fingerprint` of
    the loaded graph), in a stable order.

    The dataset enters every id by its content, not its name or path: the same path holding
    another graph gives other ids. ``transfer_only``: ``(scenario, defense) -> reason`` of
    the defenses that get no adaptive cells in a scenario (see
    :func:`grb_dist.sweep.resolve.transfer_only`); only read when the job is adaptive.

    ``inputs``: ``(scenario, attack, difficulty) -> {file: sha256}`` of the attacks that read
    files beside the graph (:func:`grb_dist.sweep.preflight.attack_inputs`): like the dataset,
    those files enter their perturbations' ids by content (and :func:`run_components`), so a
    changed file is another perturbation; attacks without files keep the ids they had.
    """
    if not isinstance(fingerprint, str) or len(fingerprint) < 16:
        raise ConfigError("run_cells needs the dataset's content fingerprint (grb_dist.store.graph_fingerprint)")
    resolved = job if isinstance(job, ResolvedJob) else resolve(job)
    spec = resolved.job
    files = {k: tuple(sorted(v.items())) for k, v in (inputs or {}).items() if v}
    targets = tuple(_model_task(resolved, fingerprint, "target", d, spec.seed) for d in spec.defenses)
    surrogates = tuple(_model_task(resolved, fingerprint, "surrogate", s, spec.seed + SURROGATE_SEED_OFFSET)
                       for s in spec.surrogates)
    excluded = dict(transfer_only or {}) if spec.adaptive else {}
    extra_surrogates: tuple[ModelTask, ...] = ()
    attacks: list[AttackCell] = []
    scores: list[ScoreCell] = []
    poisoned: list[PoisonTask] = []
    for scenario in spec.scenarios:
        base = {"dataset": fingerprint, "scenario": scenario, "normalize": spec.normalize, "data_seed": spec.seed}
        selection = spec.target_selection(scenario)
        if selection is not None:  # the targets are part of what every cell of it computes
            base["targets"] = selection.to_dict()
        if scenario_of(scenario).poisons:  # the defenders train on the perturbations: a layout of its own
            extra_surrogates = _poisoning(resolved, scenario_of(scenario), base, targets, surrogates, excluded,
                                          attacks, scores, poisoned, files)
            continue
        for difficulty in spec.difficulties:
            for t in targets:
                ident = {**base, "attack": CLEAN, "difficulty": difficulty, "defense": t.model_id}
                scores.append(ScoreCell(content_hash(ident), CLEAN, CLEAN, t.name, difficulty, 0, spec.seed,
                                        t.file_stem, None, scenario))
        for attack in spec.scenario_attacks(scenario):
            for s in surrogates:
                _cells(spec, base, scenario, attack, s, targets, TRANSFER, attacks, scores, files=files,
                       selection=selection)
        if spec.adaptive:
            for attack in spec.scenario_attacks(scenario):
                built = resolved.attack(scenario, attack, spec.difficulties[0])
                if not adapts(scenario, built):
                    continue
                for t in targets:
                    if (scenario, t.name) not in excluded:
                        _cells(spec, base, scenario, attack, t, (t,), ADAPTIVE, attacks, scores, surrogates[0],
                               built.adaptive_defaults, files, selection)
    return Cells(spec, spec.config_hash, targets, surrogates + extra_surrogates, tuple(attacks), tuple(scores),
                {k: v for k, v in excluded.items() if k[0] in spec.scenarios}, tuple(poisoned))


def _poisoning(resolved: ResolvedJob, scenario: Scenario, base: Mapping[str, Any], targets: tuple[ModelTask, ...],
               surrogates: tuple[ModelTask, ...], excluded: Mapping[tuple[str, str], str],
               attacks: list[AttackCell], scores: list[ScoreCell], poisoned: list[PoisonTask],
               files: Mapping[tuple[str, str, str], tuple[tuple[str, str], ...]]) -> tuple[ModelTask, ...]:
    """A poisoning scenario's cells: a clean training per defense, a global perturbation per
    (attack, surrogate, repeat), a training per (perturbation, defense), each scored on every
    difficulty (module docstring); in a targeted job (``poisoning.budgets`` given), a
    perturbation per difficulty instead, fighting that difficulty's test nodes with its
    budget and scored on it alone (:meth:`~grb_dist.sweep.job.JobSpec.perturbation_difficulties`).
    The attacker's surrogates are trained as the defender trains, on the whole clean graph
    (Metattack's self-training labels come from them).

    Adaptive cells (an adaptive job): per (defense, gradient attack, repeat) a perturbation
    computed on the defense itself -- its model trained on the clean graph, which is also its
    clean rows' model (the attack's ``adaptive_defaults``: ``meta_prbcd`` takes its
    meta-gradient through the defense's own training) -- fighting the first attacker
    surrogate's predictions; the defense is then trained on it and scored.

    Returns the models attacks run on that are not defenses: the attacker's surrogates, and
    the defenses' clean models that adaptive attacks run on."""
    spec = resolved.job
    selection = spec.target_selection(scenario)

    def train_on(t: ModelTask, pid: str | None, attack: str, surrogate: str, repeat: int, seed: int,
                 threat: str = TRANSFER, scored: tuple[str, ...] = spec.difficulties) -> ModelTask:
        task = _poisoned_task(t, pid, base, scenario.name, (attack, surrogate, repeat, seed, threat), scored,
                              selection)
        poisoned.append(task)
        scores.extend(task.cells)
        return task.model

    def perturb(attack: str, targeted: bool, attacker: ModelTask, owner: str, threat: str,
                defaults: Mapping[str, Any] | None, defenses: tuple[ModelTask, ...]) -> None:
        """``attack``'s perturbations on ``attacker`` (per difficulty when ``targeted``, else
        one global; every repeat), each trained on by ``defenses`` and scored on its
        difficulty (a global one: on every difficulty). Global transfer perturbations' ids
        hash what they always did."""
        for difficulty in spec.perturbation_difficulties(scenario, targeted):
            for repeat in range(spec.repeats):
                seed = spec.attack_seed(repeat)
                params = spec.attack_params(attack, difficulty, seed, scenario, defaults)
                ident = {**base, "attack": attack, "params": params, "surrogate": attacker.model_id, "repeat": repeat}
                if threat != TRANSFER:
                    ident.update(threat=threat, labels=attackers[0].model_id)
                if targeted:
                    ident.update(difficulty=difficulty, targets="difficulty")
                read = files.get((scenario.name, attack, difficulty), ())
                if read:
                    ident.update(inputs=dict(read))
                pid = content_hash(ident)
                attacks.append(AttackCell(attack, owner, difficulty, repeat, seed, params, attacker.file_stem, pid,
                                          scenario.name, threat,
                                          attackers[0].file_stem if threat != TRANSFER else None,
                                          targeted, read, selection))
                for t in defenses:
                    train_on(t, pid, attack, owner, repeat, seed, threat,
                             (difficulty,) if targeted else spec.difficulties)

    clean = {t.name: train_on(t, None, CLEAN, CLEAN, 0, spec.seed) for t in targets}
    attackers = tuple(ModelTask("surrogate", s.name, s.seed, s.params, s.train, s.at,
                                content_hash({"surrogate": s.model_id, "setting": "transductive"}), "transductive",
                                True) for s in surrogates)
    adaptive: dict[str, ModelTask] = {}
    for attack in spec.scenario_attacks(scenario):
        targeted = scenario.per_target or (getattr(attack_class(attack, scenario), "targetable", True)
                                           and spec.targeted(scenario))
        for s in attackers:
            perturb(attack, targeted, s, s.name, TRANSFER, None, targets)
        built = resolved.attack(scenario.name, attack, spec.perturbation_difficulties(scenario, targeted)[0])
        if not (spec.adaptive and adapts(scenario.name, built)):
            continue
        for t in targets:
            if (scenario.name, t.name) not in excluded:
                perturb(attack, targeted, adaptive.setdefault(t.name, clean[t.name]), t.name, ADAPTIVE,
                        built.adaptive_defaults, (t,))
    return attackers + tuple(adaptive.values())


def _poisoned_task(t: ModelTask, pid: str | None, base: Mapping[str, Any], scenario: str,
                   row: tuple[str, str, int, int, str], scored: tuple[str, ...],
                   selection: TargetSelection | None = None) -> PoisonTask:
    """Defense ``t`` trained on perturbation ``pid`` (``None``: the clean graph) and its score
    cells on the ``scored`` difficulties; ``row``: the cells' (attack, surrogate, repeat,
    seed, threat). A clean cell's id hashes what evasion's clean rows hash, with the
    transductive model's id."""
    attack, surrogate, repeat, seed, threat = row
    model = ModelTask("poisoned", t.name, t.seed, t.params, t.train, t.at,
                      content_hash({"defense": t.model_id, "perturbation": pid, "setting": "transductive"}),
                      pid[:16] if pid else "clean", True)
    cells = tuple(ScoreCell(content_hash({**base, "attack": CLEAN, "difficulty": d, "defense": model.model_id})
                            if pid is None else content_hash({"perturbation": pid, "defense": t.model_id,
                                                              "difficulty": d}),
                            attack, surrogate, t.name, d, repeat, seed, model.file_stem, pid, scenario, threat)
                  for d in scored)
    return PoisonTask(model, pid, cells, selection)


def _cells(spec: JobSpec, base: Mapping[str, Any], scenario: str, attack: str, attacker: ModelTask,
           targets: tuple[ModelTask, ...], threat: str, attacks: list[AttackCell], scores: list[ScoreCell],
           labeler: ModelTask | None = None, defaults: Mapping[str, Any] | None = None,
           files: Mapping[tuple[str, str, str], tuple[tuple[str, str], ...]] | None = None,
           selection: TargetSelection | None = None) -> None:
    """The perturbations of ``attack`` on ``attacker``'s model (every difficulty and repeat),
    fighting ``labeler``'s predictions when given, with the attack's ``defaults`` under the
    job's parameters, and their score cells against ``targets``. Transfer ids hash what
    they always did; adaptive ids also the threat and the labeler; an attack reading
    ``files`` also their contents."""
    for difficulty in spec.difficulties:
        for repeat in range(spec.repeats):
            seed = spec.attack_seed(repeat)
            params = spec.attack_params(attack, difficulty, seed, scenario, defaults)
            ident = {**base, "attack": attack, "params": params, "surrogate": attacker.model_id,
                     "difficulty": difficulty, "repeat": repeat}
            if threat != TRANSFER:
                ident.update(threat=threat, labels=labeler.model_id if labeler else None)
            read = (files or {}).get((scenario, attack, difficulty), ())
            if read:
                ident.update(inputs=dict(read))
            pid = content_hash(ident)
            attacks.append(AttackCell(attack, attacker.name, difficulty, repeat, seed, params, attacker.file_stem,
                                      pid, scenario, threat, labeler.file_stem if labeler else None, inputs=read,
                                      selection=selection))
            for t in targets:
                cid = content_hash({"perturbation": pid, "defense": t.model_id})
                scores.append(ScoreCell(cid, attack, attacker.name, t.name, difficulty, repeat, seed, t.file_stem,
                                        pid, scenario, threat))


@dataclass(frozen=True)
class Work:
    """What one sweep invocation computes of a run's cells, given what the run already holds.

    Attributes:
        todo: the score cells not stored.
        attacks_needed: perturbations the missing cells score (stored ones included).
        attacks_to_run: the needed perturbations not stored.
        models: models to train (or load): the surrogates of the attacks to run, first, so
            attacks can start while the defenses train; then the defenses of missing cells
            (and of adaptive attacks to run).
    """

    todo: tuple[ScoreCell, ...]
    attacks_needed: tuple[AttackCell, ...]
    attacks_to_run: tuple[AttackCell, ...]
    models: tuple[ModelTask, ...]
    #: the poisoning trainings with a cell not stored (their cells are in ``todo`` too)
    poisoned: tuple[PoisonTask, ...] = ()

    @property
    def trainings(self) -> tuple[ModelTask, ...]:
        """Every training of the work: the models, then the defenses trained on poisoned graphs."""
        return (*self.models, *(pt.model for pt in self.poisoned))

    @property
    def scored_defenses(self) -> list[str]:
        """The defenses the Scorers hold: those of the missing cells that are not poisoning's
        (a poisoned defense is scored by its own training task)."""
        return sorted({c.defense for c in self.todo if not c.trained_on_perturbation})

    def totals(self) -> dict[str, int]:
        """The progress stages' totals: ``train`` models, ``attack`` perturbations,
        ``score`` cells (of all the cells; stored cells count as done)."""
        return {"train": len(self.models), "attack": len(self.attacks_needed)}


def needed_work(p: Cells, done_cells: set[str], has_perturbation: Callable[[str], bool]) -> Work:
    """The :class:`Work` of the cells ``p`` for a run holding the score cells ``done_cells`` and
    the perturbations for which ``has_perturbation`` is true (reads nothing itself)."""
    todo = tuple(c for c in p.scores if c.cell_id not in done_cells)
    wanted = {c.perturbation_id for c in todo}
    needed = tuple(a for a in p.attacks if a.perturbation_id in wanted)
    to_run = tuple(a for a in needed if not has_perturbation(a.perturbation_id))
    # an adaptive attack's model is a defense's, its labels a surrogate's
    attacker_stems = {a.surrogate_model for a in to_run} | {a.labels_from for a in to_run if a.labels_from}
    targets = {c.defense for c in todo if not c.trained_on_perturbation}  # a poisoned defense trains on its own
    models = tuple(s for s in p.surrogates if s.file_stem in attacker_stems) + tuple(
        t for t in p.targets if t.name in targets or t.file_stem in attacker_stems)
    poisoned = tuple(pt for pt in p.poisoned if any(c.cell_id not in done_cells for c in pt.cells))
    return Work(todo, needed, to_run, models, poisoned)


def run_components(p: Cells) -> dict[str, dict[str, Any]]:
    """What each name of a job's cells means, for the run manifest: a run directory grows with new
    names (attacks, defenses, surrogates, difficulties, repeats) but a name it already knows
    must keep its meaning, so that (scenario, dataset, difficulty, attack, surrogate,
    defense, repeat) names one cell of the run.

    ``job``: the job seed (it seeds models and attacks); ``models``: per file stem the
    model's id, parameters and training settings; ``attacks``: per ``<attack>/<difficulty>``
    (``<scenario>/<attack>/<difficulty>`` in the scenarios other than injection; ``.../adaptive`` for
    adaptive cells, which may run with other parameters: ``Attack.adaptive_defaults``) the
    attack parameters (without the per-repeat seed), and ``inputs``, ``{file: sha256}`` of the
    files it reads beside the graph (only for an attack that reads some: a published set), so
    a run refuses the same name computed from another file.
    """
    spec = p.spec
    models = {t.file_stem: {"role": t.role, "name": t.name, "model_id": t.model_id, "params": dict(t.params),
                            "train": dict(t.train), "at": dict(t.at) if t.at is not None else None}
              for t in p.trainings}
    attacks = {}
    for a in p.attacks:
        key = scenario_of(a.scenario).record_key(a.attack, a.difficulty)
        if a.threat != TRANSFER:
            key = f"{key}/{a.threat}"
        attacks[key] = {k: v for k, v in a.params.items() if k != "seed"}
        if a.inputs:
            attacks[key]["inputs"] = dict(a.inputs)
    return json.loads(canonical_json({"job": {"seed": {"seed": spec.seed}}, "models": models, "attacks": attacks}))


__all__ = ["ATTACK_BATCH", "AttackCell", "ModelTask", "Cells", "PoisonTask", "ScoreCell", "Work", "needed_work", "run_cells",
           "run_components"]
