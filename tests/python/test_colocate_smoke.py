"""benchmarks/colocate.py as a CPU smoke run (tiny_cnn, 32 px, N in 1,2, seconds).

Checks that every (source, N) row is measured without error, that the
numbers are consistent (aggregate = sum of the jobs; delta = sum of the
alone step times / the slowest co-located step; loading CPU only where
there is loading), that the table, the plots (where matplotlib is
installed, else a note) and the merged --plot-only output are written, and
that --repeat measures every row in rounds and gives each figure its range.
"""
import copy
import json
import os
import re
import subprocess
import sys

import pytest

import _bc_helpers as H

H.require_batchcast()
H.require_server()
SCRIPT = os.path.join(H.REPO, "benchmarks", "colocate.py")


def _run(*args, timeout=120):
    env = dict(os.environ, BATCHCAST_BUILD_DIR=H.BUILD)
    r = subprocess.run([sys.executable, SCRIPT, *args], env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_smoke_run_measures_every_row_and_writes_table_and_plots(tmp_path):
    out = tmp_path / "out"
    stdout = _run("--smoke", "--out", str(out), "--data", str(tmp_path / "data"))
    with open(out / "colocate.json") as f:
        results = json.load(f)
    runs = results["runs"]
    assert sorted((r["source"], r["jobs"]) for r in runs) == sorted(
        (s, n) for s in ("synthetic", "dataloader", "batchcast") for n in (1, 2)), runs
    alone = {r["source"]: r["job"][0]["step_s"] for r in runs if r["jobs"] == 1}
    for r in runs:
        assert r["error"] is None, r
        assert len(r["job"]) == r["jobs"]
        assert all(j["img_s"] > 0 and j["steps"] >= 1 for j in r["job"]), r
        assert r["img_s"] == pytest.approx(sum(j["img_s"] for j in r["job"]))
        assert r["delta"] == pytest.approx(r["jobs"] * alone[r["source"]] / r["step_s_max"])
        if r["source"] == "synthetic":
            assert r["loading_cores"] == 0
        else:
            assert r["loading_cores"] > 0, r  # workers or the server did the decoding
        if r["source"] == "dataloader":
            assert r["dl_workers"] == 1
        if r["source"] == "batchcast":
            assert r["server_samples_s"] > 0
            assert "consumers: " + str(r["jobs"]) in r["server_stat_text"], r["server_stat_text"]
    table = (out / "colocate.md").read_text()
    assert table.count("| off | tiny_cnn |") == 6, table
    assert "delta" in table and "loading CPU" in table
    if _has_matplotlib():
        for png in ("colocate_throughput.png", "colocate_delta.png"):
            assert (out / png).stat().st_size > 1000
    else:
        assert "matplotlib not found: no plots" in stdout
    assert "batchcast" in stdout and "x the per-job DataLoaders'" in stdout, stdout

    # --plot-only merges result files (e.g. the MPS off and on calls of the GPU host).
    on = copy.deepcopy(results)
    for r in on["runs"]:
        r["mps"] = "on"
    on["mps"] = {"on": "on (test)"}
    with open(tmp_path / "on.json", "w") as f:
        json.dump(on, f)
    merged_dir = tmp_path / "merged"
    _run("--plot-only", str(out / "colocate.json"), str(tmp_path / "on.json"), "--out",
         str(merged_dir))
    with open(merged_dir / "colocate.json") as f:
        merged = json.load(f)
    assert len(merged["runs"]) == 12 and set(merged["mps"]) == {"off", "on"}
    assert (merged_dir / "colocate.md").read_text().count("| on | tiny_cnn |") == 6


def test_hosted_rows_serve_every_job_from_a_server_inside_job_0(tmp_path):
    # Source "hosted": batchcast.Server inside job 0's process, every job a Loader.
    out = tmp_path / "out"
    stdout = _run("--smoke", "--sources", "synthetic,hosted", "--out", str(out), "--data",
                  str(tmp_path / "data"))
    with open(out / "colocate.json") as f:
        runs = json.load(f)["runs"]
    assert sorted((r["source"], r["jobs"]) for r in runs) == sorted(
        (s, n) for s in ("synthetic", "hosted") for n in (1, 2)), runs
    for r in (r for r in runs if r["source"] == "hosted"):
        assert r["error"] is None, r
        assert r["server_samples_s"] > 0, r
        assert r["loading_cores"] > 0, r  # the server's bc-* threads in job 0
        text = r["server_stat_text"]  # read while the jobs ran
        assert f"consumers: {r['jobs']}" in text, text
        pid = re.search(r"^server \S+ \(pid (\d+)\)", text).group(1)
        assert f"colocate-job0 (pid {pid})" in text, text  # job 0 hosts the server
    assert "hosted" in stdout and "% of the data-unbound rate" in stdout, stdout
    assert "Traceback" not in (out / "colocate-jobs.log").read_text()


def test_repeat_measures_each_row_in_rounds_and_gives_the_ranges(tmp_path):
    out = tmp_path / "out"
    stdout = _run("--smoke", "--sources", "synthetic,batchcast", "--repeat", "2", "--out",
                  str(out), "--data", str(tmp_path / "data"))
    with open(out / "colocate.json") as f:
        results = json.load(f)
    assert results["meta"]["repeat"] == 2
    runs = {(r["source"], r["jobs"]): r for r in results["runs"]}
    assert sorted(runs) == [(s, n) for s in ("batchcast", "synthetic") for n in (1, 2)], runs
    for r in runs.values():
        assert r["error"] is None and r["failed_repeats"] == 0, r
        rounds = [x["img_s"] for x in r["repeats"]]
        assert len(rounds) == 2 and all(x > 0 for x in rounds), r
        assert r["range"]["img_s"] == [min(rounds), max(rounds)]
        assert r["img_s"] in rounds  # the median round's figures (the lower of two)
    # / synthetic: round by round, against the synthetic row of the same round.
    bc, syn = runs[("batchcast", 2)], runs[("synthetic", 2)]
    ratios = sorted(a["img_s"] / b["img_s"] for a, b in zip(bc["repeats"], syn["repeats"]))
    table = (out / "colocate.md").read_text()
    assert "2 rounds (median round, range in brackets)" in table, table
    assert f"({ratios[0]:.2f}-{ratios[1]:.2f})" in table, table
    assert f"({100 * ratios[0]:.0f}-{100 * ratios[1]:.0f}% over 2 rounds)" in stdout, stdout
    assert stdout.count("round 2/2: ") == 4, stdout


def test_unknown_source_is_refused_with_the_choices(tmp_path):
    r = subprocess.run([sys.executable, SCRIPT, "--sources", "synthetic,nope", "--out",
                        str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert ("unknown source 'nope' (choose from synthetic, dataloader, batchcast, hosted)"
            in r.stderr)


def test_a_hosting_job_that_cannot_start_its_server_is_an_error_on_each_hosted_row(tmp_path):
    out = tmp_path / "out"
    stdout = _run("--smoke", "--sources", "hosted", "--server-workers", "-1", "--out", str(out),
                  "--data", str(tmp_path / "data"))
    with open(out / "colocate.json") as f:
        runs = json.load(f)["runs"]
    assert [r["jobs"] for r in runs] == [1, 2], runs
    for r in runs:
        assert r["error"].startswith("the hosting jobs did not start: batchcast.Server: "), r
    assert "the hosting jobs did not start" in stdout
