"""The allocator policy of computing processes (grb_dist.core.allocator)."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from grb_dist.cli import app
from grb_dist.core import allocator
from grb_dist.core.errors import ConfigError

#: In a fresh interpreter: the training policy, then the resident set (MiB) within
#: ``training_heap`` with a 256 MiB block allocated, after freeing it, after leaving
#: the block, and after freeing a second such block outside it.
_PROBE = """
import json, os
import torch
from grb_dist.core import allocator

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

out = {"policy": allocator.training_policy()}
with allocator.training_heap():
    block = torch.ones(64 * 2**20)  # 256 MiB, touched
    out["held"] = rss()
    del block
    out["freed"] = rss()
out["left"] = rss()
block = torch.ones(64 * 2**20)
out["held_after"] = rss()
del block
out["freed_after"] = rss()
print(json.dumps(out))
"""


def _probe(env_value, code=_PROBE):
    """The JSON that ``code`` prints last, run in a fresh interpreter under the policy
    ``env_value`` (``None``: the default)."""
    env = {k: v for k, v in os.environ.items() if k != allocator.ALLOCATOR_ENV}
    if env_value is not None:
        env[allocator.ALLOCATOR_ENV] = env_value
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux") or allocator._libc() is None, reason="glibc only")
def test_training_keeps_freed_large_blocks_until_it_ends_and_system_returns_them_at_once():
    cached = _probe(None)
    assert cached["policy"] == "cache"
    assert cached["freed"] > cached["held"] - 64, cached  # still resident after del, for the next epoch
    assert cached["left"] < cached["held"] - 192, cached  # given back on leaving
    assert cached["freed_after"] < cached["held_after"] - 192, cached  # glibc's behaviour again outside
    system = _probe("system")
    assert system["policy"] == "system"
    assert system["freed"] < system["held"] - 192, system  # glibc unmaps it on free


#: In a fresh interpreter: glibc's threshold adapted to a freed 16 MiB block, then, within
#: ``training_heap``, sixteen 8 MiB blocks below a small live one (so that the heap could
#: not give them back from its top): the resident set (MiB) while held and once freed.
_FRAGMENT_PROBE = """
import json, os
import torch
from grb_dist.core import allocator

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

first = torch.ones(4 * 2**20)  # 16 MiB, mapped; freed, glibc's threshold adapts to it
del first
out = {}
with allocator.training_heap():
    blocks = [torch.ones(2 * 2**20) for _ in range(16)]  # 8 MiB each, touched
    pin = torch.ones(1024)
    out["held"] = rss()
    del blocks
    out["freed"] = rss()
print(json.dumps(out))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or allocator._libc() is None, reason="glibc only")
def test_system_policy_gives_back_blocks_below_glibcs_adapted_threshold():
    r = _probe("system", _FRAGMENT_PROBE)
    assert r["freed"] < r["held"] - 96, r  # 128 MiB freed in the middle of the heap: given back


#: In a fresh interpreter, within ``training_heap``: ten 256 MiB blocks (2.5 GiB, more than
#: the largest int, which a threshold set to it would trim above), then one block of 2.25
#: GiB (above a mmap threshold of that int): the resident set (GiB) held and once freed.
_LARGE_HEAP_PROBE = """
import json, os
import torch
from grb_dist.core import allocator

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30

out = {}
with allocator.training_heap():
    blocks = [torch.ones(64 * 2**20) for _ in range(10)]
    out["held"] = rss()
    del blocks
    out["freed"] = rss()
    block = torch.ones(9 * 2**28 // 4)
    out["held_large"] = rss()
    del block
    out["freed_large"] = rss()
print(json.dumps(out))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or allocator._libc() is None, reason="glibc only")
def test_training_keeps_a_free_heap_of_more_than_2_gib():
    """A wide model's training on a large graph frees more than 2 GiB at a time: the heap
    keeps all of it for the next epoch, not what a 2 GiB threshold left (every epoch then
    faulted the rest back in)."""
    r = _probe(None, _LARGE_HEAP_PROBE)
    assert r["freed"] > r["held"] - 0.25, r  # the 2.5 GiB top of the heap kept
    assert r["freed_large"] > r["held_large"] - 0.25, r  # a 2.25 GiB block from the heap, kept


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
