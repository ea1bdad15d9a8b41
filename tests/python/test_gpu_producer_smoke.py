"""benchmarks/gpu_producer.py as a CPU smoke run (--smoke: tiny, no GPU, no torch).

Checks that the run ends well, measures a rate and the server's CPU, reads the
stage shares of the stats (producer_stage_s: the CPU source's read and
decode_augment, slot_wait) and the consumer's wait, and says that the device
cache is off.
"""
import json
import os
import subprocess
import sys

import _bc_helpers as H

H.require_batchcast()
H.require_server()
SCRIPT = os.path.join(H.REPO, "benchmarks", "gpu_producer.py")


def test_smoke_run_reports_rate_stages_and_wait(tmp_path):
    env = dict(os.environ, BATCHCAST_BUILD_DIR=H.BUILD)
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--out", str(tmp_path / "out"),
                        "--data", str(tmp_path / "data")],
                       env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(tmp_path / "out" / "gpu_producer.json") as f:
        result = json.load(f)
    read = result["read"]
    assert result["device_cache"] is False
    assert read["images_per_s"] > 0
    assert read["server_cores"] > 0
    assert {"read", "decode_augment", "slot_wait"} <= set(read["stage_share"]), read
    assert read["stage_share"]["decode_augment"] > 0
    assert read["stage_threads"]["decode_augment"] == 1
    assert 0 <= read["consumer_wait_share"] <= 1.5, read
    assert "device cache: OFF" in r.stdout and "server -> one Loader" in r.stdout, r.stdout


def test_issue9_diagnosis_programs_check_their_arguments(tmp_path):
    # decoder_interference.py and fed_coupling.py need a GPU to run; without
    # one, they must at least load and refuse a bad argument before any work.
    bench = os.path.join(H.REPO, "benchmarks")
    for script, bad, says in (("fed_coupling.py", ["--runs", "fed,nope"], "unknown run 'nope'"),
                              ("decoder_interference.py", ["--variants", "engine:rgb"],
                               "bad variant 'engine:rgb'")):
        r = subprocess.run([sys.executable, os.path.join(bench, script), "--out",
                            str(tmp_path / "out"), *bad], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and says in r.stderr, (script, r.stdout + r.stderr)
