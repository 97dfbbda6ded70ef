"""The options of a job and of where it runs, which ``sweep`` and ``plan`` share: one
definition each, so the two commands read a job the same way."""

from __future__ import annotations

import typer

from grb_dist.cli.base import out_value, path_value

DATASET_OPTION = typer.Option(None, "--dataset", "-d", help="Catalogue name (uses its shipped job, grb_dist/jobs/<name>.yaml; one without a job runs its kind's, Pro-GNN's graphs prognn-cora.yaml, said in a note) or a dataset path (uses the default job); default: csbm.")
JOB_OPTION = typer.Option(None, "--job", parser=path_value, help="Job file (YAML) instead of the dataset's shipped job.")
SCENARIO_OPTION = typer.Option(None, "--scenario", help="injection (graph injection), modification (edge flips and feature changes at test time), poisoning (edge flips before the defenses train), targeted (each target node attacked alone, Nettack's setting), targeted-poisoning (the same, each defense trained on each target's perturbation) or all (every scenario of the job: the optional ones, poisoning, targeted and targeted-poisoning, when it lists their attacks); default: the job's (injection).")
ATTACKS_OPTION = typer.Option(None, help="Attacks to run, comma-separated (default: the job's); with several scenarios each keeps the names it knows.")
DEFENSES_OPTION = typer.Option(None, help="Defenses to score, comma-separated.")
SURROGATES_OPTION = typer.Option(None, help="Surrogate models of the attacker, comma-separated.")
DIFFICULTIES_OPTION = typer.Option(None, help="Difficulties, comma-separated (easy, medium, hard, full).")
REPEATS_OPTION = typer.Option(None, help="Repeats of every attack.")
SEED_OPTION = typer.Option(None, help="Job seed (graph, split, models, attacks).")
N_INJECT_OPTION = typer.Option(None, "--n-inject", help="Injected nodes (overrides every budget); a comma-separated list (20,40,60) sweeps each value as attack <name>@<value>.")
EDGES_PER_NODE_OPTION = typer.Option(None, "--edges-per-node", help="Edges per injected node.")
STEPS_OPTION = typer.Option(None, help="Attack optimisation steps.")
RATIO_EDGE_MOD_OPTION = typer.Option(None, "--ratio-edge-mod", help="Modification budget: flipped edges as a share of the graph's edges, in (0, 1]; a comma-separated list (0.01,0.05) sweeps each value as attack <name>@<value>.")
ADAPTIVE_OPTION = typer.Option(None, "--adaptive/--no-adaptive", help="Also attack every defense with itself as the surrogate (white-box): the scenario's gradient attacks, scored on that defense, next to the transfer cells (default: the job's, off).")
OUT_OPTION = typer.Option(None, "--out", "-o", parser=out_value, help="Run directory (default: results/<dataset>), or a run in object storage: s3://bucket/prefix, gs://bucket/prefix (docs/cluster.md).")
ADDRESS_OPTION = typer.Option(None, "--address", envvar="RAY_ADDRESS", help="Ray cluster to join (auto, host:port); default: start a local Ray.")
NUM_CPUS_OPTION = typer.Option(None, "--num-cpus", help="CPUs of the local Ray (default: all).")
THREADS_OPTION = typer.Option(None, "--threads", help="torch intra-op threads of each training, attack and scoring task (1..1024; default: Ray's, one per reserved CPU).")
DASHBOARD_OPTION = typer.Option(None, "--dashboard/--no-dashboard", help="Start the Ray dashboard of a local Ray (default: Ray's choice).")
DOWNLOAD_OPTION = typer.Option(True, help="Download missing official datasets.")
