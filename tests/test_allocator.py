"""The allocator policy of computing processes (grb_dist.core.allocator)."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.core import allocator
from grb_dist.core.errors import ConfigError

#: In a fresh interpreter: the policy in force, then the resident set (MiB) with a 256 MiB
#: block allocated, after freeing it, and after :func:`allocator.release`.
_PROBE = """
import json, os
import torch
from grb_dist.core import allocator

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

policy = allocator.configure()
block = torch.ones(64 * 2**20)  # 256 MiB, touched
held = rss()
del block
freed = rss()
allocator.release()
print(json.dumps({"policy": policy, "held": held, "freed": freed, "released": rss()}))
"""


def _probe(env_value):
    env = {k: v for k, v in __import__("os").environ.items() if k != allocator.ALLOCATOR_ENV}
    if env_value is not None:
        env[allocator.ALLOCATOR_ENV] = env_value
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux") or allocator._libc() is None, reason="glibc only")
def test_cache_keeps_a_freed_large_block_until_released_and_system_returns_it_at_once():
    cached = _probe(None)
    assert cached["policy"] == "cache"
    assert cached["freed"] > cached["held"] - 64, cached  # still resident after del
    assert cached["released"] < cached["held"] - 192, cached  # given back by release()
    system = _probe("system")
    assert system["policy"] == "system"
    assert system["freed"] < system["held"] - 192, system  # glibc unmaps it on free


def test_unknown_policy_is_a_config_error(monkeypatch):
    monkeypatch.setenv(allocator.ALLOCATOR_ENV, "jemalloc")
    with pytest.raises(ConfigError, match="GRB_DIST_ALLOCATOR='jemalloc' is not an allocator policy; use one of"):
        allocator.mode()
    monkeypatch.setenv(allocator.ALLOCATOR_ENV, "system")
    assert allocator.mode() == "system"
    monkeypatch.delenv(allocator.ALLOCATOR_ENV)
    assert allocator.mode() == "cache"


def test_commands_that_compute_refuse_an_unknown_policy_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv(allocator.ALLOCATOR_ENV, "fast")
    monkeypatch.chdir(tmp_path)
    for args in (["train"], ["sweep"], ["sweep", "--plan"]):
        r = CliRunner().invoke(app, args)
        lines = [line for line in r.output.strip().splitlines() if line.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and "GRB_DIST_ALLOCATOR='fast'" in lines[0], (args, r.output)
    assert not any(tmp_path.iterdir())
