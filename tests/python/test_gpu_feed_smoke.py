"""benchmarks/gpu_feed.py as a CPU smoke run (--smoke: a tiny dataset served on
the CPU, two short rounds, no decode-only reference, which needs a GPU).

Checks that the run ends well, measures a rate and the server's CPU in each
round, gives the range over the rounds and says what it did not measure.
"""
import json
import os
import subprocess
import sys

import _bc_helpers as H

H.require_batchcast()
H.require_server()
SCRIPT = os.path.join(H.REPO, "benchmarks", "gpu_feed.py")


def test_smoke_run_measures_each_round_and_gives_the_range(tmp_path):
    env = dict(os.environ, BATCHCAST_BUILD_DIR=H.BUILD)
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--out", str(tmp_path / "out"),
                        "--data", str(tmp_path / "data")], env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(tmp_path / "out" / "gpu_feed.json") as f:
        result = json.load(f)
    assert result["files"] == 24 and result["bytes"] > 0
    assert len(result["rounds"]) == 2
    for got in result["rounds"]:
        assert got["fed"]["images_per_s"] > 0
        assert got["fed"]["server_cores"] > 0, got
        assert "decode_only" not in got
    assert "--batch-size 8" in result["server_command"], result["server_command"]
    assert "server -> one Loader (batch 8): " in r.stdout, r.stdout
    assert "nvJPEG decode-only: not measured (no GPU)" in r.stdout, r.stdout
    fed = sorted(x["fed"]["images_per_s"] for x in result["rounds"])
    assert f"({fed[0]:,.0f}-{fed[1]:,.0f}) img/s" in r.stdout, r.stdout


def test_repeat_must_be_positive(tmp_path):
    r = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path), "--repeat", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--repeat must be at least 1" in r.stderr, r.stderr
