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
import time

import pytest

import _bc_helpers as H

H.require_batchcast()
H.require_server()
BENCH = os.path.join(H.REPO, "benchmarks")
sys.path.insert(0, BENCH)  # the benchmark programs, imported by the tests below
SCRIPT = os.path.join(BENCH, "gpu_producer.py")


def test_smoke_run_reports_rate_stages_and_wait(tmp_path):
    env = dict(os.environ, BATCHCAST_BUILD_DIR=H.BUILD)
    env.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--out", str(tmp_path / "out"),
                        "--data", str(tmp_path / "data"), "--in-process", "normal"],
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
    # Note [Hardware queues]: CUDA's default unless --hardware-queues.
    assert "CUDA hardware queues: unset (8)" in r.stdout, r.stdout
    # --in-process: the same server run by batchcast.Server in the benchmark's
    # process; its CPU is that of its own threads (named bc-*), not the
    # process's.
    inproc = result["in_process"]["normal"]["read"]
    assert inproc["images_per_s"] > 0
    assert 0 < inproc["server_cores"] < 8, inproc
    assert inproc["stage_share"]["decode_augment"] > 0
    assert "in the trainer's process (batchcast.Server, one CUDA context)" in r.stdout, r.stdout


def test_in_process_takes_only_the_gpu_priorities(tmp_path):
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--out", str(tmp_path / "out"),
                        "--in-process", "normal,urgent"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "--in-process takes normal and/or high, got 'urgent'" in r.stderr
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--out", str(tmp_path / "out"),
                        "--in-process-only"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--in-process-only needs --in-process" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--out", str(tmp_path / "out"),
                        "--in-process", "normal", "--in-process-only", "--handoff"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--handoff compares with the server process" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--out", str(tmp_path / "out"),
                        "--hardware-queues", "33"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "argument --hardware-queues: invalid choice" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--out", str(tmp_path / "out"),
                        "--trainer-sm-share", "90"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "need --mps on" in r.stderr, r.stderr


def test_summary_gives_the_in_process_runs():
    import gpu_producer

    text = gpu_producer.summary({
        "args": {"train_batch": 128}, "decode_only": {"images_per_s": 20000.0},
        "in_process": {"high": {
            "read": {"images_per_s": 19000.0, "server_cores": 1.5,
                     "stage_share": {"hw_decode": 0.9}, "stage_threads": {}},
            "pairs": [[100.0, 95.0], [100.0, 97.0], [100.0, 90.0]], "synthetic": 100.0,
            "fed": 95.0, "ratio": 0.95,
            "server": {"trainer_wait_share": 0.1, "server_cores": 1.2,
                       "server_images_per_s": 9000.0, "stage_share": {"hw_decode": 0.5}},
            "synthetic_beside_paced_pull": 96.0,
            "paced_pull": {"images_per_s": 94.0, "error": None}}}})
    assert "--gpu-priority high:" in text, text
    assert ("synthetic beside this server pulled by a thread at the fed rate: 96 img/s = 0.96 "
            "(the puller got 94 img/s)") in text, text
    assert "server -> one Loader: 19,000 img/s = 0.95 of decode-only" in text, text
    assert "fed / synthetic = 0.95, the median of 3 pairs: 0.95, 0.97, 0.90" in text, text
    assert "Next() waited 10% of the time; server threads 1.20 cores" in text, text


def test_issue9_diagnosis_programs_check_their_arguments(tmp_path):
    # decoder_interference.py and fed_coupling.py need a GPU to run; without
    # one, they must at least load and refuse a bad argument before any work.
    for script, bad, says in (("fed_coupling.py", ["--runs", "fed,nope"], "unknown run 'nope'"),
                              ("decoder_interference.py", ["--variants", "engine:rgb"],
                               "bad variant 'engine:rgb'"),
                              ("decoder_interference.py", ["--variants", "hybrid:rgbi:nopipe"],
                               "nopipe with hardware only")):
        r = subprocess.run([sys.executable, os.path.join(BENCH, script), "--out",
                            str(tmp_path / "out"), *bad], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and says in r.stderr, (script, r.stdout + r.stderr)


def test_repeated_trainer_windows_give_the_median_ratio(tmp_path):
    # --repeat N alternates synthetic and fed windows; the figure is the
    # median of the per-pair ratios, and each pair's ratio is printed.
    r = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path / "out"), "--repeat", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--repeat must be at least 1" in r.stderr, r.stderr
    import gpu_producer

    pairs = [[100.0, 50.0], [120.0, 120.0], [100.0, 90.0]]
    text = gpu_producer.summary({"args": {"train_batch": 128}, "train_synthetic": 100.0,
                                 "train_fed": 90.0, "train_fed_ratio": 0.9,
                                 "train_pairs": pairs})
    assert "fed / synthetic = 0.90" in text, text
    assert "the median of 3 pairs: 0.50, 1.00, 0.90" in text, text
    # --handoff with --repeat: its own pairs, its own median ratio.
    text = gpu_producer.summary({"args": {"train_batch": 128}, "train_synthetic": 100.0,
                                 "train_fed": 90.0, "train_fed_ratio": 0.9,
                                 "train_fed_synthetic_server": 97.0, "train_handoff_ratio": 0.97,
                                 "train_handoff_pairs": [[100.0, 97.0], [100.0, 99.0],
                                                         [110.0, 99.0]]})
    assert ("hand-off only, no decoding): 97 img/s = 0.97, the median of 3 pairs with "
            "synthetic: 0.97, 0.99, 0.90") in text, text


def test_summary_says_where_the_reference_decoder_read_its_files():
    # The server passes its files to nvJPEG from page-locked memory (Note
    # [Pinned bitstreams]); the decode-only reference does too, and the
    # summary says so next to the ratio it is the base of.
    import gpu_producer

    for given, said in (("pinned", "page-locked"), ("pageable", "pageable"), (None, "pageable")):
        ref = {"backend": "nvJPEG hardware", "images_per_s": 30000.0}
        if given:
            ref["input"] = given
        text = gpu_producer.summary({"args": {"train_batch": 128}, "decode_only": ref})
        assert f"decode-only reference backend: nvJPEG hardware (files in {said} memory)" in text, \
            text


def test_the_reference_decoder_reads_page_locked_files(tmp_path, monkeypatch):
    # gpu_producer's decode-only reference runs gpu_pipeline_bench with the
    # files in page-locked memory, as the server passes them: fails if it
    # went back to pageable files (a lower reference, a flattering ratio).
    import gpu_producer

    seen = []

    def fake_run(cmd, **kwargs):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, '{"images_per_s": 1.0, "input": "pinned"}\n',
                                           "")

    monkeypatch.setattr(gpu_producer.subprocess, "run", fake_run)
    args = gpu_producer.parse_args(["--out", str(tmp_path / "out")])
    assert gpu_producer.decode_only("/build", "/data", args)["input"] == "pinned"
    cmd = seen[0]
    assert cmd[0].endswith("gpu_pipeline_bench") and "--modes" in cmd, cmd
    assert cmd[cmd.index("--nvjpeg-input") + 1] == "pinned", cmd


def test_an_idle_consumer_does_not_stop_a_skip_server(tmp_path):
    # fed_coupling.py's idle_* runs on a CPU server: its idle consumer
    # (--idle) holds the producer up, the server (fed_coupling.SKIP_IDLE)
    # skips it forward, and its reader (--reader) still gets batches.
    import fed_coupling
    import gpu_producer

    args = gpu_producer.parse_args(["--out", str(tmp_path / "out"), "--smoke"])
    args.classes, args.per_class, args.server_batch = 4, 300, 64  # epoch of 1,200 > 256
    data = str(tmp_path / "data")
    gpu_producer.make_dataset(args, data)
    log = tmp_path / "server.log"
    server = gpu_producer.ServerProc(H.BUILD, data, H.unique_name("idle"), args, str(log),
                                     extra=fed_coupling.SKIP_IDLE)
    env = dict(os.environ, PYTHONPATH=H.PYDIR)
    script = os.path.join(BENCH, "fed_coupling.py")
    idle = subprocess.Popen([sys.executable, script, "--idle", server.name, "60"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30  # the idle consumer attached before the reader
        while not any(c.get("name") == f"idle-{idle.pid}"
                      for c in server.stats().get("consumers", [])):
            assert time.monotonic() < deadline and idle.poll() is None, idle.communicate()
            time.sleep(0.1)
        r = subprocess.run([sys.executable, script, "--reader", server.name, "4", "1"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout.splitlines()[-1])["images_per_s"] > 0, r.stdout
        assert idle.poll() is None, idle.communicate()  # still idling, holding its batch
    finally:
        idle.kill()
        idle.communicate()
        server.stop()
    assert "skipping" in log.read_text(), log.read_text()[-2000:]


def test_server_prefix_wraps_every_server_command(tmp_path):
    # BC_SERVER_PREFIX (how benchmarks/cupti_trace.cc is injected) runs
    # before the batchcast-server command: a wrapper that leaves a mark.
    wrap = tmp_path / "wrap.sh"
    wrap.write_text('#!/bin/sh\necho "$@" >> "$MARK"\nexec "$@"\n')
    wrap.chmod(0o755)
    mark = tmp_path / "mark"
    env = dict(os.environ, BATCHCAST_BUILD_DIR=H.BUILD, BC_SERVER_PREFIX=str(wrap),
               MARK=str(mark))
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--out", str(tmp_path / "out"),
                        "--data", str(tmp_path / "data")],
                       env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = mark.read_text().splitlines()
    assert len(lines) == 1 and "batchcast-server serve" in lines[0], lines


def test_cupti_stats_summarizes_a_trace(tmp_path):
    # benchmarks/cupti_stats.py on a hand-made trace of cupti_trace.cc's
    # format: two bins; one kernel and one copy per image, an event
    # synchronize per image (the round trip of issue 9); junk lines skipped.
    import cupti_stats

    s = 1_000_000_000
    trace = tmp_path / "cupti_1.txt"
    trace.write_text("\n".join([
        "T 12 bc-producer",
        "T 13 python3",
        f"K {s} {s + 3000} {s - 500} {s - 1000} 7 100 nvjpeg::rgba2rgb kernel",
        f"M {s + 1000} {s + 5000} 42000 7 1 101",
        f"R {s - 2000} {s - 1500} 12 100 cudaLaunchKernel_v7000",
        f"R {s - 1400} {s - 1300} 12 101 cudaMemcpyAsync_v3020",
        f"R {s} {s + 300000} 12 102 cudaEventSynchronize_v3020",
        f"R {s + 400000} {s + 500000} 12 103 cudaEventSynchronize_v3020",
        f"K {s + 10000} {s + 90000} 0 {s + 2000} 9 104 conv",
        f"R {s + 1000} {s + 2000} 13 104 cudaLaunchKernel_v7000",
        "garbage line",
        f"K {2 * s} {2 * s + 200000} 0 0 7 105 augment",
        "",
    ]))
    records, names = cupti_stats.read(str(trace))
    assert names == {"12": "bc-producer", "13": "python3"}
    lines = cupti_stats.summarize(records)
    assert len(lines) == 2, lines
    assert "copies x1 0 ms 0 MB" in lines[0], lines[0]
    assert "nvjpeg::rgba2rgb kernel x1 3 us (wait 1 us)" in lines[0], lines[0]
    assert "cudaEventSynchronize_v3020 x2 0 ms (200 us)" in lines[0], lines[0]
    assert "augment x1 200 us" in lines[1] and "gpu 0 ms" in lines[1], lines[1]
    assert cupti_stats.covered([(0, 10), (5, 20), (30, 40)]) == 30
    # Per thread: each kernel and copy is charged to the thread whose call
    # launched it (correlation id), with its wait from submission to start.
    text = "\n".join(cupti_stats.by_thread(records, names, bin_s=1.0))
    producer, trainer = text.index("bc-producer (12)"), text.index("python3 (13)")
    assert producer < trainer, text  # the thread with the most API time first
    assert "cudaEventSynchronize_v3020 x2 0 ms (200 us, p90 300 us)" in text, text
    assert "stream 7 nvjpeg::rgba2rgb kernel x1 3 us (wait p50 1 us, p90 1 us)" in text, text
    assert "stream 7 copy kind 1 x1 4 us" in text, text
    assert "stream 9 conv x1 80 us (wait p50 8 us, p90 8 us)" in text[trainer:], text
    assert "stream 9" not in text[producer:trainer], text
    r = subprocess.run([sys.executable, os.path.join(BENCH, "cupti_stats.py"),
                        str(trace), "--bin", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--bin must be > 0" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, os.path.join(BENCH, "cupti_stats.py"), str(trace),
                        "--threads"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "bc-producer (12)" in r.stdout, r.stdout + r.stderr


def test_gpu_pipeline_bench_refuses_unknown_decoder_settings(tmp_path):
    # The decoder settings issue9_gpu_run.sh's trace part and
    # decoder_interference.py pass: a bad value is refused before any GPU work.
    bench = os.path.join(H.BUILD, "benchmarks", "gpu_pipeline_bench")
    if not os.path.exists(bench):
        pytest.skip("gpu_pipeline_bench is not built")
    for option, good in (("--nvjpeg-output", "rgbi,yuv,nv12"),
                         ("--nvjpeg-pipeline", "on,off"),
                         ("--nvjpeg-input", "pageable,pinned,device")):
        r = subprocess.run([bench, str(tmp_path), option, "bogus"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode != 0, (option, r.stdout + r.stderr)
        assert f"{option}: bogus not in {{{good}}}" in r.stdout + r.stderr, r.stdout + r.stderr


def test_issue9_gpu_run_names_its_parts(tmp_path):
    # A part it does not know is refused before anything is built, naming
    # the parts it has (inproc: the server in the trainer's process).
    script = os.path.join(BENCH, "issue9_gpu_run.sh")
    r = subprocess.run(["bash", script, str(tmp_path / "b"), str(tmp_path / "out"), "bogus"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "one of: diagnosis colocate coupling trace loop mps inproc inproc_trace queues queues_mps mps_parts inproc_parts colocate_hosted colocate_matrix region region_mps region_loader mps_share mps_batch" in r.stderr, r.stderr
    assert not (tmp_path / "b").exists()


def test_decoder_interference_refuses_bad_settings(tmp_path):
    # What issue9 runs pass (--mps, --input, --only-420, variants): a bad value
    # is refused before any GPU work or MPS daemon.
    if not os.path.exists(os.path.join(H.BUILD, "tools", "batchcast-server")):
        pytest.skip("batchcast-server is not built")
    script = os.path.join(BENCH, "decoder_interference.py")
    env = {**os.environ, "BATCHCAST_BUILD_DIR": H.BUILD}
    for extra, msg in ((["--mps", "bogus"], "argument --mps: invalid choice"),
                       (["--input", "device"], "argument --input: invalid choice"),
                       (["--only-420", "--variants", "hardware:nv21"], "bad variant 'hardware:nv21'")):
        r = subprocess.run([sys.executable, script, "--out", str(tmp_path), *extra],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 2, (extra, r.stdout + r.stderr)
        assert msg in r.stderr, r.stderr


def test_server_process_and_in_process_server_get_the_same_options():
    # One option set for both (server_options): the GPU image server with the
    # device cache off and the --gpu-priority asked for; the hand-off server
    # only synthetic samples on the ring's device.
    import gpu_producer

    args = gpu_producer.parse_args(["--out", "x", "--workers", "4", "--nvjpeg-calls", "2",
                                    "--nvjpeg-region", "off"])
    opts = gpu_producer.server_options(args, "high")
    assert opts == {"batch_size": 256, "window": 8, "size": 224, "device": "cuda:0",
                    "dtype": "float16", "transform": "train", "workers": 4, "decode": "gpu",
                    "device_cache_mb": 0, "transcode_cache_mb": 1024, "nvjpeg_calls": 2,
                    "nvjpeg_region": False, "gpu_priority": "high"}, opts
    assert gpu_producer.server_options(gpu_producer.parse_args(["--out", "x"]),
                                       "normal")["nvjpeg_region"] is True
    assert gpu_producer.server_options(args, "high", synthetic=True) == {
        "batch_size": 256, "window": 8, "size": 224, "device": "cuda:0", "synthetic": 100000}
    assert gpu_producer.serve_flags({"window": 8, "nvjpeg_region": False, "shuffle": True}) == [
        "--window", "8", "--no-nvjpeg-region", "--shuffle"]
    # The server process gets its own SM share under MPS, never the trainer's.
    trainer_env = {"PATH": "/bin", gpu_producer.SM_SHARE: "90"}
    shared = gpu_producer.parse_args(["--out", "x", "--mps", "on", "--server-sm-share", "20"])
    assert gpu_producer.server_env(shared, trainer_env) == {"PATH": "/bin",
                                                            gpu_producer.SM_SHARE: "20"}
    assert gpu_producer.server_env(args, trainer_env) == {"PATH": "/bin"}
    # Every key is an option of batchcast.Server and of `batchcast-server serve`.
    from batchcast._server import SERVER_OPTIONS

    assert set(opts) | {"synthetic"} <= SERVER_OPTIONS


def test_paced_puller_keeps_its_rate_and_reports_errors():
    # gpu_producer.PacedPuller (--paced with --in-process): a thread that
    # pulls batches from an in-process server at a given rate and drops them.
    import types

    import gpu_producer

    batchcast = H.require_batchcast()
    args = types.SimpleNamespace(loader_batch=10)
    with batchcast.Server(synthetic=1000, size=8, batch_size=10,
                          name=H.unique_name("puller")) as server:
        with gpu_producer.PacedPuller(server, args, rate=200) as puller:
            time.sleep(1.5)
    assert puller.error is None, puller.error
    assert 120 <= puller.images_per_s <= 230, puller.images_per_s  # about 200, not flat out
    gone = types.SimpleNamespace(name=H.unique_name("no-such-server"))
    with gpu_producer.PacedPuller(gone, args, rate=200) as puller:
        puller.thread.join(timeout=30)
    assert puller.error is not None and puller.images_per_s == 0.0
