"""Side by side: grb-dist's injection attacks next to the original GRB code (PyPI grb==0.1.0).

Reproducible comparison of issue 8: same data arrays, same budgets and steps, the same
trained GCN surrogate, interleaved timed runs, and the accuracy of the same grb-dist target
models after each tool's injection (to check that both attacks are equally strong).

Set-up (automatic, once; ``--fresh-venv`` rebuilds it): a throw-away virtual environment
outside the repository (``--venv``, default ``~/.cache/grb-dist/compare-grb-venv``) gets
``torch==2.13.0`` (``--torch``), ``grb==0.1.0`` without its declared dependencies (cogdl,
matplotlib, networkx, recommonmark: the modules used here do not import them) and what
they import: numpy, scipy, pandas, scikit-learn, at their current releases (no pin is needed
for the modules used here: attacks, GCN layer, adjacency normalisation; the original's
trainer would need ``scipy<1.15``). One line of the installed copy is then patched, in that
venv only: the original's random injection builds the perturbed
adjacency with ``sp.hstack([adj_attack, add2])`` and then sets its ``.row`` / ``.col`` /
``.data``; current SciPy returns CSR there (no ``.row``: ``AttributeError``), so the line
becomes ``sp.hstack([adj_attack, add2], format="coo")``, the format older SciPy returned.
The line is repeated in each attack module (fgsm, pgd, speit, tdgia, rnd); every occurrence
is patched and printed.

Method:

* Data: cora-legacy (``--cora-dir``, the early GRB release in the GRB layout; full
  difficulty, 60 injected x 20 edges, 200 steps) and the ``csbm-grb-flickr`` twin generated
  by grb_dist (seed 0; hard difficulty, 200 x 100, 20 steps), both loaded and normalised by
  ``grb_dist.datasets.load_dataset``; the same arrays (features, edges, targets) are handed
  to both tools as ``.npz`` files. Feature limits: the normalised features' min and max,
  for both tools. Step size 0.01 (FGSM/PGD sign step, SPEIT/TDGIA Adam learning rate).
* Surrogate: one grb-dist GCN [64, 64, 64] (seed 0), trained once per dataset (cora-legacy:
  at most 400 epochs, early stopping; flickr twin: 20 epochs, enough on this easy twin) and
  cached as an ``.npz`` state_dict keyed by a hash of the data (``--model-cache``); its weights
  go to both tools (the original's side runs them in the original's own GCNConv layers,
  see ``bench/peers/grb_original_runner.py``; the script checks that both compute the same logits).
* Targets: grb-dist GCN and GCN_ln [64, 64, 64], trained with seed 1. Accuracy on the
  attacked difficulty's test nodes, mean over the repeats (each repeat has its own seed).
* Attacks (original / grb-dist): FGSM and PGD (sign ascent; both with cross-entropy: 0.1.0
  defaults to ``nll_loss`` on logits), SPEIT (Adam, random edges), TDGIA (5 sequential
  rounds of 0.2 x budget, the original with ``inject_mode="tdgia"``: its default is random
  edges). TDGIA runs ``steps / 5`` steps per round by default, so that every attack makes
  the same total number of optimisation steps (``--tdgia-steps-per-round`` changes it).
  PGD keeps each tool's random start (original: N(0, feat_max / 10); grb-dist: N(0, 0.01)).
* Processes: each tool runs in its own long-lived worker process (the original in its venv,
  grb-dist in the project's Python); both are started, load their inputs and run one
  untimed warm-up FGSM step before any timing. Each timed run is requested from one worker
  while the other waits idle, alternating original, grb-dist, original, grb-dist ... for
  every attack and repeat. Both use ``--threads`` torch threads (default 1; OMP / MKL /
  OpenBLAS thread counts are set to the same number).
* What is timed: the wall time (``time.perf_counter``) of one attack call, nothing else.
  Original: ``attack.attack(model, adj, features, target_mask, GCNAdjNorm)`` with the scipy
  CSR adjacency and the feature tensor already in memory (it normalises the adjacency,
  computes the clean predictions, injects edges and optimises features). grb-dist:
  ``build_attack(name, params).attack(graph, surrogate, targets)`` timed around
  ``.attack`` only (input checks, receptive-field subgraph, clean predictions, edges,
  feature optimisation, audit). Not timed: data loading, training, building the attack
  object, writing the injection. Reported: median over the repeats, and the ratio
  original / grb-dist of the medians.

The current figures are in docs/performance.md (Injection attacks). Found in the original:
its random injection never marks a target as linked, so an injected node can get the same
target twice (10 of 60 nodes on cora-legacy, 82 of 200 on the twin; the edge then
counts twice); its TDGIA writes ``feat_max * sin(Z)`` and ignores ``feat_min`` (48% of the
injected values below the cora-legacy minimum; clipped into the box, its accuracy after
attack becomes 0.622 / 0.767), and defaults to random edges (``inject_mode="random"``);
SPEIT's structured modes (``random-inter``, ``multi-layer``) fail in ``attack()`` with a
``TypeError`` (no ``target_node`` is passed); FGSM, PGD and SPEIT default to ``nll_loss`` on
logits.

Usage::

    python bench/peers/compare_grb.py                          # both datasets, 3 repeats (about 15 min on 2 cores)
    python bench/peers/compare_grb.py --cases cora --repeats 5
    python bench/peers/compare_grb.py --flickr-steps 50 --threads 2
    python bench/peers/compare_grb.py --setup-only             # only build the GRB venv
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from grb_dist.models.tensors import graph_tensors
from grb_dist.sweep.cost.calibrate import cpu_model
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the shared helpers
from common import ROOT, cora_legacy, timed  # noqa: E402

RUNNER = Path(__file__).resolve().parent / "grb_original_runner.py"
DEFAULT_CORA = cora_legacy()
DEFAULT_VENV = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "grb-dist" / "compare-grb-venv"
ATTACKS = ("fgsm", "pgd", "speit", "tdgia")
HIDDEN = [64, 64, 64]
STEP_SIZE = 0.01
SEQUENTIAL_STEP = 0.2
GRB_REQUIREMENT = "grb==0.1.0"
GRB_DEPS = ["numpy", "scipy", "pandas", "scikit-learn"]
PATCH_OLD = "adj_attack = sp.hstack([adj_attack, add2])"
PATCH_NEW = 'adj_attack = sp.hstack([adj_attack, add2], format="coo")'
READY_MARKER = "compare-grb-ready.json"


# --------------------------------------------------------------------------- set-up


def _run(cmd: list[str]) -> None:
    print("  $", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True)


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_grb_venv(venv: Path, python: str, torch_spec: str, fresh: bool) -> dict:
    """Create (or reuse) the throw-away venv with the original GRB code, patched; return its record."""
    marker = venv / READY_MARKER
    if marker.exists() and not fresh:
        record = json.loads(marker.read_text())
        print(f"GRB venv: reusing {venv} (built {record['built']}; --fresh-venv rebuilds it)")
        for line in record["patched"]:
            print(f"  patched earlier: {line}")
        return record
    if venv.exists():
        shutil.rmtree(venv)
    print(f"GRB venv: creating {venv}")
    _run([python, "-m", "venv", venv])
    py = venv_python(venv)
    _run([py, "-m", "pip", "install", "-q", torch_spec])
    _run([py, "-m", "pip", "install", "-q", "--no-deps", GRB_REQUIREMENT])
    _run([py, "-m", "pip", "install", "-q", *GRB_DEPS])
    pkg = Path(subprocess.run([py, "-c", "import grb, os; print(os.path.dirname(grb.__file__))"],
                              check=True, capture_output=True, text=True).stdout.strip())
    patched = []
    for path in sorted((pkg / "attack").glob("*.py")):
        lines = path.read_text().splitlines(keepends=True)
        hit = False
        for i, line in enumerate(lines):
            if line.strip() == PATCH_OLD:
                lines[i] = line.replace(PATCH_OLD, PATCH_NEW)
                patched.append(f"{path.relative_to(venv)}:{i + 1}: {PATCH_OLD} -> {PATCH_NEW}")
                hit = True
        if hit:
            path.write_text("".join(lines))
    if not patched:
        raise SystemExit(f"error: the line to patch ({PATCH_OLD}) was not found under {pkg / 'attack'}")
    print("GRB venv: SciPy compatibility fix applied to this venv's copy of the original only:")
    for line in patched:
        print(f"  patched {line}")
    versions = subprocess.run(
        [py, "-c", "import grb, torch, numpy, scipy, pandas, sklearn, sys; print(sys.version.split()[0], grb.__version__,"
         " torch.__version__, numpy.__version__, scipy.__version__, pandas.__version__, sklearn.__version__)"],
        check=True, capture_output=True, text=True).stdout.split()
    record = {
        "built": time.strftime("%Y-%m-%d %H:%M:%S"), "patched": patched,
        "versions": dict(zip(["python", "grb", "torch", "numpy", "scipy", "pandas", "scikit-learn"], versions)),
        "install": [torch_spec, f"{GRB_REQUIREMENT} --no-deps", *GRB_DEPS],
    }
    marker.write_text(json.dumps(record, indent=1))
    return record


# --------------------------------------------------------------------------- workers


class Worker:
    """A long-lived worker process answering one JSON request per line."""

    def __init__(self, name: str, cmd: list[str], env: dict, log_path: Path):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=env, cwd=ROOT)
        self.info = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.log.flush()
            tail = self.log_path.read_text()[-3000:]
            raise SystemExit(f"error: the {self.name} worker stopped (exit {self.proc.returncode}); its log ends:\n{tail}")
        return json.loads(line)

    def request(self, req: dict) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
        self.log.close()


def grb_dist_worker(data_dir: str, threads: int) -> None:
    """The grb-dist side: load the exchanged arrays and surrogate, run attacks on request."""
    import numpy as np
    import torch

    from grb_dist.attacks import build_attack
    from grb_dist.core.graph import Graph
    from grb_dist.models.grammar import build_model

    proto = os.fdopen(os.dup(1), "w")
    sys.stdout = sys.stderr
    torch.set_num_threads(threads)
    d = Path(data_dir)
    g_npz = np.load(d / "graph.npz", allow_pickle=False)
    split = {k[len("split_"):]: g_npz[k] for k in g_npz.files if k.startswith("split_")}
    graph = Graph(g_npz["features"], g_npz["edge_index"], g_npz["labels"], split, name=str(g_npz["name"]),
                  num_classes=int(g_npz["num_classes"])).validate()
    targets = g_npz["targets"]
    state = np.load(d / "surrogate_state.npz", allow_pickle=False)
    model = build_model("gcn", graph.num_features, graph.num_classes, {"hidden_sizes": [int(h) for h in state["hidden"]]})
    model.load_state_dict({k: torch.from_numpy(state[k]) for k in state.files if k != "hidden"})
    model.eval()
    proto.write(json.dumps({"ready": True, "torch": torch.__version__, "threads": torch.get_num_threads()}) + "\n")
    proto.flush()
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "quit":
            break
        params = dict(n_inject=req["n_inject"], edges_per_node=req["edges_per_node"], feat_lim_min=None,
                      feat_lim_max=None, steps=req["steps"], step_size=req["step_size"], seed=req["seed"])
        if req["attack"] == "tdgia":
            params["sequential_step"] = req["sequential_step"]
        torch.manual_seed(req["seed"])
        attack = build_attack(req["attack"], params)
        seconds, inj = timed(attack.attack, graph, model, targets)
        np.savez(req["out"], features=inj.features, edges=inj.edges)
        proto.write(json.dumps({"seconds": seconds}) + "\n")
        proto.flush()


def thread_env(threads: int, isolated: bool) -> dict:
    """Environment of a worker: thread counts fixed; ``isolated`` drops PYTHONPATH (the venv's own packages only)."""
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = str(threads)
    if isolated:
        env.pop("PYTHONPATH", None)
    return env


# --------------------------------------------------------------------------- one case


def data_fingerprint(g) -> str:
    """Hash of the arrays a model is trained on (names cached models; a changed dataset retrains)."""
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    for a in (g.features, g.edge_index, g.labels, *(g.split[k] for k in sorted(g.split))):
        h.update(a.tobytes())
    return h.hexdigest()


def trained_model(name: str, g, seed: int, epochs: int, fingerprint: str, cache: Path | None):
    """grb-dist model ``name`` [64, 64, 64] trained inductively (seed, at most ``epochs``), cached as an
    ``.npz`` state_dict under ``cache`` keyed by the data's fingerprint (no pickle)."""
    import numpy as np
    import torch

    from grb_dist.models.grammar import build_model
    from grb_dist.models.train import TrainConfig, train

    params = {"hidden_sizes": HIDDEN}
    path = cache / f"{g.name}-{fingerprint}-{name}-{'x'.join(map(str, HIDDEN))}-seed{seed}-epochs{epochs}.npz" if cache else None
    if path is not None and path.exists():
        try:
            model = build_model(name, g.num_features, g.num_classes, params)
            z = np.load(path, allow_pickle=False)
            model.load_state_dict({k: torch.from_numpy(z[k]) for k in z.files})
            print(f"  {name} (seed {seed}): loaded from {path}")
            return model.eval()
        except Exception as err:  # a model whose structure changed since: retrain
            print(f"  {name} (seed {seed}): cached weights unusable ({err}); retraining")
    res = train(name, g, params, TrainConfig(seed=seed, epochs=epochs))
    print(f"  {name} (seed {seed}): trained {res.epochs_run} epochs in {res.seconds:.0f} s, "
          f"best validation accuracy {res.best_val_accuracy:.3f}")
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, **{k: v.detach().cpu().numpy() for k, v in res.model.state_dict().items()})
        tmp.replace(path)
    return res.model.eval()


def prepare_case(name: str, dataset: str, difficulty: str, case_dir: Path, args) -> dict:
    """Load the data, train surrogate and targets, write the exchange files."""
    import numpy as np
    import torch

    from grb_dist.datasets import load_dataset

    t_load, g = timed(load_dataset, dataset)
    targets = g.targets(difficulty)
    epochs = args.cora_train_epochs if name == "cora" else args.flickr_train_epochs
    fingerprint = data_fingerprint(g)

    def train_all():
        surrogate = trained_model("gcn", g, args.surrogate_seed, epochs, fingerprint, args.model_cache)
        return surrogate, {m: trained_model(m, g, args.target_seed, epochs, fingerprint, args.model_cache)
                           for m in ("gcn", "gcn_ln")}

    t_train, (surrogate, tgt) = timed(train_all)
    case_dir.mkdir(parents=True, exist_ok=True)
    np.savez(case_dir / "graph.npz", features=g.features, edge_index=g.edge_index, labels=g.labels,
             targets=targets.astype(np.int64), num_classes=np.int64(g.num_classes), name=np.str_(g.name),
             **{f"split_{k}": v for k, v in g.split.items()})
    sd = {k: v.detach().cpu().numpy() for k, v in surrogate.state_dict().items()}
    np.savez(case_dir / "surrogate_state.npz", hidden=np.asarray(HIDDEN), **sd)
    n_layers = len(surrogate.layers)
    np.savez(case_dir / "surrogate.npz", n_layers=np.int64(n_layers),
             **{f"weight_{i}": sd[f"layers.{i}.lin.weight"] for i in range(n_layers)},
             **{f"bias_{i}": sd[f"layers.{i}.bias"] for i in range(n_layers)})
    with torch.no_grad():
        t = graph_tensors(g)
        logits = surrogate(t.x, t.edge_index).numpy()
    return {"graph": g, "targets": targets, "surrogate_logits": logits, "targets_models": tgt,
            "load_s": t_load, "train_s": t_train}


def inj_stats(graph, targets, inj, lo: float, hi: float, n_inject: int, edges_per_node: int) -> dict:
    import numpy as np

    from grb_dist.attacks import audit_injection
    from grb_dist.core.errors import AuditError

    f, e = inj.features, inj.edges
    pairs = e[0] * (graph.num_nodes + n_inject + 1) + e[1]
    per_node = np.bincount(e[0] - graph.num_nodes, minlength=n_inject)
    tol = 1e-6
    out = {
        "below_min": float((f < lo - tol).mean()), "above_max": float((f > hi + tol).mean()),
        "duplicate_edges": int(pairs.size - np.unique(pairs).size),
        "nodes_with_duplicates": int(sum(np.unique(e[1][e[0] == v]).size < int((e[0] == v).sum())
                                         for v in np.unique(e[0]))),
        "max_edges_per_node": int(per_node.max()) if per_node.size else 0,
        "non_target_edges": int((~np.isin(e[1], targets) & (e[1] < graph.num_nodes)).sum()),
    }
    try:
        audit_injection(graph, inj, n_inject=n_inject, edges_per_node=edges_per_node, feat_min=lo, feat_max=hi,
                        targets=targets)
        out["audit"] = "pass"
    except AuditError as err:
        out["audit"] = str(err)
    return out


def compare_case(name: str, cfg: dict, args, record: dict, work: Path) -> dict:
    import numpy as np

    from grb_dist.attacks.injection.tdgia import round_sizes
    from grb_dist.evaluation.evaluate import evaluate
    from grb_dist.core.graph import Injection

    case_dir = work / name
    print(f"\n[{name}] loading {cfg['label']} and training the surrogate (seed {args.surrogate_seed}) and the "
          f"targets GCN, GCN_ln (seed {args.target_seed}) ...", flush=True)
    prep = prepare_case(name, cfg["dataset"], cfg["difficulty"], case_dir, args)
    g, targets = prep["graph"], prep["targets"]
    lo, hi = float(g.features.min()), float(g.features.max())
    print(f"[{name}] {g.num_nodes} nodes, {g.num_edges} edges, {g.num_features} features, {g.num_classes} classes; "
          f"{targets.size} {cfg['difficulty']} targets; load {prep['load_s']:.1f} s, training {prep['train_s']:.1f} s",
          flush=True)
    workers = {}
    try:
        workers["original"] = Worker("original", [venv_python(args.venv), RUNNER, "--data", case_dir,
                                                  "--threads", args.threads],
                                     thread_env(args.threads, True), case_dir / "original.log")
        workers["grb-dist"] = Worker("grb-dist", [sys.executable, Path(__file__).resolve(), "--worker", case_dir,
                                                  "--threads", args.threads],
                                     thread_env(args.threads, False), case_dir / "grb-dist.log")
        orig_logits = np.load(case_dir / "original_clean_logits.npz")["logits"]
        diff = float(np.abs(orig_logits - prep["surrogate_logits"]).max())
        same = float((orig_logits.argmax(1) == prep["surrogate_logits"].argmax(1)).mean())
        print(f"[{name}] surrogate check: the original's layers with the shared weights give logits within {diff:.1e} "
              f"of grb-dist's GCN, same prediction on {same:.2%} of nodes", flush=True)
        if diff > 1e-3:
            print(f"[{name}] WARNING: the two surrogates differ; the accuracy comparison is not like for like")
        n_rounds = len(round_sizes(cfg["n_inject"], SEQUENTIAL_STEP))
        tdgia_steps = args.tdgia_steps_per_round if args.tdgia_steps_per_round is not None else max(1, cfg["steps"] // n_rounds)
        base = dict(cmd="attack", n_inject=cfg["n_inject"], edges_per_node=cfg["edges_per_node"],
                    step_size=STEP_SIZE, sequential_step=SEQUENTIAL_STEP)
        for tool, w in workers.items():  # untimed warm-up
            w.request({**base, "attack": "fgsm", "steps": 1, "seed": 0, "out": str(case_dir / f"warmup-{tool}.npz")})
        times = {a: {"original": [], "grb-dist": []} for a in args.attacks}
        files = {a: {"original": [], "grb-dist": []} for a in args.attacks}
        for r in range(args.repeats):
            for a in args.attacks:
                steps = tdgia_steps if a == "tdgia" else cfg["steps"]
                for tool in ("original", "grb-dist"):
                    out = case_dir / f"{a}-{tool}-{r}.npz"
                    rep = workers[tool].request({**base, "attack": a, "steps": steps, "seed": r, "out": str(out)})
                    times[a][tool].append(rep["seconds"])
                    files[a][tool].append(out)
                print(f"[{name}] repeat {r + 1}/{args.repeats} {a}: original {times[a]['original'][-1]:.2f} s, "
                      f"grb-dist {times[a]['grb-dist'][-1]:.2f} s", flush=True)
        info = {tool: w.info for tool, w in workers.items()}
    finally:
        for w in workers.values():
            w.close()

    clean = {m: evaluate(model, g)[cfg["difficulty"]] for m, model in prep["targets_models"].items()}
    rows = []
    for a in args.attacks:
        row = {"attack": a, "steps": tdgia_steps if a == "tdgia" else cfg["steps"],
               "steps_total": tdgia_steps * n_rounds if a == "tdgia" else cfg["steps"], "clean": clean}
        for tool in ("original", "grb-dist"):
            accs = {m: [] for m in prep["targets_models"]}
            clipped = {m: [] for m in prep["targets_models"]}
            stats = []
            for path in files[a][tool]:
                z = np.load(path, allow_pickle=False)
                inj = Injection(features=z["features"], edges=z["edges"], num_original=g.num_nodes)
                stats.append(inj_stats(g, targets, inj, lo, hi, cfg["n_inject"], cfg["edges_per_node"]))
                inj_c = Injection(features=np.clip(z["features"], lo, hi), edges=z["edges"], num_original=g.num_nodes)
                for m, model in prep["targets_models"].items():
                    accs[m].append(evaluate(model, g, inj, difficulties=[cfg["difficulty"]])[cfg["difficulty"]])
                    if stats[-1]["below_min"] or stats[-1]["above_max"]:
                        clipped[m].append(evaluate(model, g, inj_c, difficulties=[cfg["difficulty"]])[cfg["difficulty"]])
            row[tool] = {"seconds": times[a][tool], "median_s": statistics.median(times[a][tool]),
                         "accuracy": {m: statistics.mean(v) for m, v in accs.items()},
                         "accuracy_clipped": {m: statistics.mean(v) for m, v in clipped.items() if v},
                         "stats": stats}
        row["ratio"] = row["original"]["median_s"] / row["grb-dist"]["median_s"]
        rows.append(row)
    return {"case": name, "config": cfg, "rows": rows, "workers": info, "feat_limits": [lo, hi],
            "surrogate_logit_diff": diff, "targets": int(targets.size), "nodes": g.num_nodes}


# --------------------------------------------------------------------------- report


def code_state() -> str:
    """The grb-dist code measured: commit, and whether grb_dist/ had uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "grb_dist"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split("\n")
        dirty = [line for line in dirty if line.strip()]
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"commit {head}" + (f" plus uncommitted changes in {len(dirty)} file(s) under grb_dist/" if dirty else "")


def report(results: list[dict], args, record: dict, load_before, load_after, state: str) -> None:
    print("\n## grb-dist vs the original GRB code (grb==0.1.0)\n")
    print("command: " + " ".join(["python", *[shlex.quote(a) for a in sys.argv]]))
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}; "
          f"torch threads {args.threads} in both workers; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after")
    v = record["versions"]
    w = results[0]["workers"] if results else {}
    print(f"original: grb {v['grb']} (patched copy, see above), torch {v['torch']}, numpy {v['numpy']}, "
          f"scipy {v['scipy']}, python {v['python']}; grb-dist: torch {w.get('grb-dist', {}).get('torch', '?')}, "
          f"python {platform.python_version()}, code {state}")
    print(f"method: same arrays and trained GCN {HIDDEN} surrogate for both tools; each tool in its own worker process; "
          f"runs interleaved original, grb-dist, ... ({args.repeats} repeats per attack, one untimed warm-up); time = "
          "wall time of the attack call only (original: attack.attack(model, adj, features, target_mask, GCNAdjNorm); "
          "grb-dist: InjectionAttack.attack(graph, surrogate, targets)), median over repeats; ratio = original / "
          f"grb-dist; accuracy = grb-dist targets GCN / GCN_ln {HIDDEN} (seed {args.target_seed}) on the attacked "
          "test nodes, mean over repeats; training epochs (not timed): cora-legacy <= "
          f"{args.cora_train_epochs}, flickr twin {args.flickr_train_epochs}; step size 0.01; TDGIA: 5 rounds, "
          "steps given per round\n")
    print("| data, budget, steps | attack | original median s | grb-dist median s | ratio | "
          "accuracy after original (GCN / GCN_ln) | accuracy after grb-dist (GCN / GCN_ln) |")
    print("|---|---|---:|---:|---:|---|---|")
    for res in results:
        c = res["config"]
        for i, row in enumerate(res["rows"]):
            steps = (f"{row['steps']} x 5 rounds" if row["attack"] == "tdgia" else f"{row['steps']} steps")
            label = f"{c['label']}, {c['difficulty']}, {c['n_inject']} x {c['edges_per_node']}"
            if i == 0:
                cl = row["clean"]
                print(f"| {label} | none (clean) | | | | {cl['gcn']:.3f} / {cl['gcn_ln']:.3f} | |")
            o, d = row["original"], row["grb-dist"]
            print(f"| {label}, {steps} | {row['attack'].upper()} | {o['median_s']:.2f} | {d['median_s']:.2f} | "
                  f"{row['ratio']:.2f}x | {o['accuracy']['gcn']:.3f} / {o['accuracy']['gcn_ln']:.3f} | "
                  f"{d['accuracy']['gcn']:.3f} / {d['accuracy']['gcn_ln']:.3f} |")
    print("\nper-repeat seconds (original | grb-dist):")
    for res in results:
        for row in res["rows"]:
            o = " ".join(f"{s:.2f}" for s in row["original"]["seconds"])
            d = " ".join(f"{s:.2f}" for s in row["grb-dist"]["seconds"])
            print(f"  {res['case']:<7}{row['attack']:<6} {o} | {d}")
    print("\nthreat-model audit of each tool's injections (grb-dist's audit rules; first repeat):")
    for res in results:
        lo, hi = res["feat_limits"]
        for row in res["rows"]:
            for tool in ("original", "grb-dist"):
                s = row[tool]["stats"][0]
                note = ""
                if row[tool]["accuracy_clipped"]:
                    ac = row[tool]["accuracy_clipped"]
                    note = f"; accuracy with features clipped to [{lo:.3f}, {hi:.3f}]: {ac['gcn']:.3f} / {ac['gcn_ln']:.3f}"
                print(f"  {res['case']:<7}{row['attack']:<6}{tool:<9} {s['audit']}; features below min "
                      f"{s['below_min']:.1%}, above max {s['above_max']:.1%}; injected nodes with a repeated target "
                      f"{s['nodes_with_duplicates']}{note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="cora,flickr", help="comma list of: cora, flickr")
    ap.add_argument("--attacks", default=",".join(ATTACKS), help="comma list of: " + ", ".join(ATTACKS))
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per tool and attack (default 3)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of both workers (default 1)")
    ap.add_argument("--cora-steps", type=int, default=200)
    ap.add_argument("--flickr-steps", type=int, default=20)
    ap.add_argument("--tdgia-steps-per-round", type=int, default=None,
                    help="TDGIA steps per round (default: steps / 5, the same total as the other attacks)")
    ap.add_argument("--cora-dir", type=Path, default=DEFAULT_CORA, help="cora-legacy in the GRB layout")
    ap.add_argument("--cora-train-epochs", type=int, default=400,
                    help="maximum training epochs on cora-legacy (early stopping, patience 50; default 400)")
    ap.add_argument("--flickr-train-epochs", type=int, default=20,
                    help="training epochs on the flickr twin (default 20: it is easy, and an epoch costs seconds)")
    ap.add_argument("--model-cache", type=Path, default=DEFAULT_VENV.parent / "compare-grb-models",
                    help="trained surrogate / target weights, keyed by data hash, seed, epochs (default %(default)s)")
    ap.add_argument("--no-model-cache", action="store_true", help="always train")
    ap.add_argument("--surrogate-seed", type=int, default=0)
    ap.add_argument("--target-seed", type=int, default=1)
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="throw-away venv for the original (default %(default)s)")
    ap.add_argument("--fresh-venv", action="store_true", help="delete and rebuild the venv")
    ap.add_argument("--python", default=sys.executable, help="interpreter the venv is created from")
    ap.add_argument("--torch", default="torch==2.13.0", help="torch requirement for the venv")
    ap.add_argument("--setup-only", action="store_true", help="build the venv and stop")
    ap.add_argument("--work-dir", type=Path, default=None, help="exchange files and logs (default: a temp dir, removed)")
    ap.add_argument("--json", type=Path, default=None, help="also write every measurement to this JSON file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run the grb-dist worker on this case dir
    args = ap.parse_args()
    if args.worker:
        grb_dist_worker(args.worker, args.threads)
        return
    args.attacks = [a.strip().lower() for a in args.attacks.split(",") if a.strip()]
    bad = [a for a in args.attacks if a not in ATTACKS]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad += [c for c in cases if c not in ("cora", "flickr")]
    if bad:
        raise SystemExit(f"error: unknown case or attack {', '.join(bad)}")
    args.venv = args.venv.expanduser().resolve()
    args.model_cache = None if args.no_model_cache else args.model_cache.expanduser().resolve()
    record = ensure_grb_venv(args.venv, args.python, args.torch, args.fresh_venv)
    print(f"GRB venv: {', '.join(f'{k} {v}' for k, v in record['versions'].items())}; installed "
          f"{'; '.join(record['install'])}")
    if args.setup_only:
        return
    import torch

    torch.set_num_threads(max(1, os.cpu_count() or 1))  # training only; the timed workers use --threads
    configs = {
        "cora": dict(label="cora-legacy", dataset=str(args.cora_dir), difficulty="full", n_inject=60,
                     edges_per_node=20, steps=args.cora_steps),
        "flickr": dict(label="csbm-grb-flickr", dataset="csbm-grb-flickr", difficulty="hard", n_inject=200,
                       edges_per_node=100, steps=args.flickr_steps),
    }
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="compare-grb-"))
    work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    state = code_state()
    t0 = time.perf_counter()
    try:
        results = [compare_case(c, configs[c], args, record, work) for c in cases]
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    report(results, args, record, load_before, load_after, state)
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"argv": sys.argv, "threads": args.threads, "venv": record, "results": [
            {k: v for k, v in r.items()} for r in results]}, indent=1, default=str))


if __name__ == "__main__":
    main()
