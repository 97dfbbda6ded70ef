#!/usr/bin/env bash
# Make the throw-away virtual environment of the peer tool (DeepRobust) used by
# bench/poisoning/deeprobust_metattack.py and bench/poisoning/compare_metattack.py.
#
#   bash bench/poisoning/peers.sh [VENV]      # default ${TMPDIR:-/tmp}/grb-dist-peers/deeprobust
#   PEER_VENV=DIR PYTHON=python3.11 bash bench/poisoning/peers.sh
#
# What worked (2026, Python 3.11, CPU only; DeepRobust 0.2.11, the latest release):
#   * torch==2.13.0 first, pinned: the CPU build (an unpinned torch pulls a multi-GB CUDA build);
#   * deeprobust --no-deps: its declared dependencies include torchvision, scikit-image,
#     tensorboardX, matplotlib, Pillow and texttable, which the graph modules used here never
#     import (and torchvision would drag a second torch);
#   * then what `from deeprobust.graph.global_attack import Metattack` and
#     `from deeprobust.graph.defense import GCN` import, at their current releases, unpinned:
#     numpy 2.4, scipy 1.17, scikit-learn, networkx, numba, tqdm (global_attack/ imports
#     node_embedding_attack: numba, networkx) and gensim (defense/ imports node_embedding:
#     gensim, scikit-learn). No older numpy/scipy is needed for Metattack and GCN.
#   * PyTorch Geometric / torch_sparse are NOT installed (PRBCD, GAT, ... need them; Metattack
#     does not). DeepRobust's fallback for a missing PyG forgets `import warnings`; the runner
#     works around that at run time (see its docstring); no installed file is patched.
set -euo pipefail

VENV="${1:-${PEER_VENV:-${TMPDIR:-/tmp}/grb-dist-peers/deeprobust}}"
PYTHON="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
DEEPROBUST_SPEC="${DEEPROBUST_SPEC:-deeprobust==0.2.11}"

if [ ! -x "$VENV/bin/python" ]; then
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --quiet)

"${PIP[@]}" "$TORCH_SPEC"
"${PIP[@]}" --no-deps "$DEEPROBUST_SPEC"
"${PIP[@]}" "$TORCH_SPEC" numpy scipy scikit-learn networkx numba tqdm gensim

# The imports the runner needs (with its one-line shim), and the versions that got installed.
"$VENV/bin/python" - <<'EOF'
import builtins, contextlib, io, warnings
builtins.warnings = warnings  # see bench/poisoning/deeprobust_metattack.py
with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
    warnings.simplefilter("ignore")
    from deeprobust.graph.defense import GCN  # noqa: F401
    from deeprobust.graph.global_attack import Metattack  # noqa: F401
from importlib.metadata import version
print("peer venv ready:", ", ".join(f"{p} {version(p)}" for p in
      ("deeprobust", "torch", "numpy", "scipy", "scikit-learn", "networkx", "numba", "gensim")))
EOF
echo "python: $VENV/bin/python"
