"""benchmarks/multi_gpu.py without GPUs: which rings paced the others in a
producer round (the rings take the stream's batches in turn, so one slow ring
sets every ring's pace; stage shares as its rounds on 4 x H200 gave them), and
the producer part's rounds and separate servers over fake servers and readers,
and the trainers part's one window, begun together, that no trainer leaves
while another measures, and its rounds.
"""
import json
import os
import re
import sys
import types

import pytest

import _bc_helpers as H

sys.path.insert(0, os.path.join(H.REPO, "benchmarks"))

import multi_gpu  # noqa: E402
from multi_gpu import paced_by  # noqa: E402


def rings(*hw_decode):
    return [{"read": 0.25, "hw_decode": v} for v in hw_decode]


def test_a_ring_far_longer_in_its_decode_calls_paced_the_others():
    assert paced_by(rings(0.97, 0.73, 0.58, 0.59)) == [0]
    assert paced_by(rings(0.52, 0.86, 0.87, 0.54)) == [1, 2]


def test_rings_close_together_paced_nobody():
    assert paced_by(rings(0.95, 0.94, 0.94, 0.95)) == []
    assert paced_by(rings(0.82, 0.82, 0.85, 0.85)) == []
    assert paced_by(rings(0.97, 0.80)) == []  # less than the gap apart


def test_one_ring_or_none_paced_nobody():
    assert paced_by(rings(0.97)) == []
    assert paced_by([]) == []
    assert paced_by([{"read": 0.3}, {"read": 0.2}]) == []  # no decode calls (CPU rings)


class FakeServer:
    """A server whose counters grow by one step per stats() call: ring 1 of
    each multi-GPU server is the one long in its decode calls, and ring 0
    waits for its turn behind it."""

    calls = 0

    def __init__(self, binary, name, options, **kwargs):
        self.rings = options["device"].count(",") + 1
        self.placement = options.get("placement", "demand")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def stats(self):
        FakeServer.calls += 1
        k = FakeServer.calls
        return {"consumers": list(range(self.rings)), "samples_published": 1000 * k * self.rings,
                "epoch_len": 20000, "mps": False, "producer_blocked_s": 0.0,
                "placement": self.placement,
                # by demand the slow ring 1 is given less: a third of the stream
                "rings": [{"samples_decoded": (500 if j == 1 and self.placement == "demand"
                                               else 1000) * k, "peer_bytes": 0,
                           "turn_wait_s": (0.3 if j == 0 else 0.0) * k,
                           "batches_written": 10 * k, "read_ahead_misses": (1 if j == 0 else 0) * k,
                           "producer_stage_s": {"read": 0.2 * k,
                                                "hw_decode": (0.9 if j == 1 else 0.5) * k}}
                          for j in range(self.rings)]}


class FakeProcess:
    def poll(self):
        return None

    def kill(self):
        pass

    def wait(self):
        pass


def fake_processes(g, script, argv, env=None):
    return [FakeProcess() for _ in range(g)]


def fake_gpus(monkeypatch):
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(device_count=lambda: 4, get_device_name=lambda i: "Fake")
    monkeypatch.setitem(sys.modules, "torch", torch)
    for name, fake in {"ServerProcess": FakeServer,
                       "start_processes": fake_processes,
                       "find_build": lambda build: "/build", "server_bin": lambda build: "server",
                       "make_dataset": lambda *a, **k: 0,
                       "warm_page_cache": lambda *a, **k: None}.items():
        monkeypatch.setattr(multi_gpu, name, fake)
    monkeypatch.setattr(multi_gpu.time, "sleep", lambda s: None)
    # --server-option writes into the module's SERVER: each test its own.
    monkeypatch.setattr(multi_gpu, "SERVER", dict(multi_gpu.SERVER))


def test_the_producer_part_runs_its_rounds_and_the_separate_servers(monkeypatch, tmp_path):
    fake_gpus(monkeypatch)
    out = tmp_path / "out.json"
    monkeypatch.setattr(sys, "argv", ["multi_gpu.py", "--data", str(tmp_path), "--repeat", "2",
                                      "--separate", "--skip", "trainers,ddp", "--json", str(out)])
    assert multi_gpu.main() == 0
    rounds = json.loads(out.read_text())["producer"]
    assert [(r["gpus"], r["round"]) for r in rounds] == [(g, k) for k in (0, 1) for g in (1, 2, 4)]
    for r in rounds:
        assert r["ratio"] > 0
        assert r["paced_by"] == []  # by demand, the server's default: nobody waits for ring 1
        assert r["given_less"] == ([1] if r["gpus"] > 1 else [])
        assert ("separate" in r) == (r["gpus"] > 1)
        if r["gpus"] > 1:
            assert len(r["separate"]["rate_per_server"]) == r["gpus"]
            assert r["separate"]["rate"] == sum(r["separate"]["rate_per_server"])


def test_a_separate_server_whose_decode_ran_slow_is_named(monkeypatch, tmp_path, capsys):
    fake_gpus(monkeypatch)

    class SecondSeparateServerSlow(FakeServer):
        """Server 1 of the separate servers publishes a tenth of the others'
        rate, its thread in nvJPEG's calls 97 % of the interval as theirs."""
        def __init__(self, binary, name, options, **kwargs):
            super().__init__(binary, name, options, **kwargs)
            self.slow, self.k = name.endswith("-s2-1"), 0

        def stats(self):
            stats = super().stats()
            self.k += 1
            stats["samples_published"] = (100 if self.slow else 1000) * self.k * self.rings
            for ring in stats["rings"]:
                ring["producer_stage_s"]["hw_decode"] = 0.97 * self.k
            return stats

    monkeypatch.setattr(multi_gpu, "ServerProcess", SecondSeparateServerSlow)
    clock = iter(range(1000))
    monkeypatch.setattr(multi_gpu.time, "monotonic", lambda: float(next(clock)))
    out = tmp_path / "out.json"
    monkeypatch.setattr(sys, "argv", ["multi_gpu.py", "--data", str(tmp_path), "--gpus", "1,2",
                                      "--separate", "--skip", "trainers,ddp", "--json", str(out)])
    assert multi_gpu.main() == 0
    one, two = json.loads(out.read_text())["producer"]
    assert two["separate"]["rate_per_server"] == [1000.0, 100.0]
    assert two["separate"]["slowed_in_decode"] == [1]
    assert "server(s) 1 below half of one GPU's rate" in capsys.readouterr().out
    # Below half of one GPU's rate but not in its decode calls: not named.
    assert multi_gpu.slowed_in_decode([1000.0, 100.0], [{"hw_decode": 0.97},
                                                        {"hw_decode": 0.3}], 1000.0) == []
    assert multi_gpu.slowed_in_decode([1000.0, 100.0], [{}, {}], None) == []


def test_grouped_readers_run_after_each_count_as_ranks_of_one_group(monkeypatch, tmp_path):
    fake_gpus(monkeypatch)
    started = []

    def processes(g, script, argv, env=None):
        started.append([argv(i) for i in range(g)])
        return fake_processes(g, script, argv, env)

    monkeypatch.setattr(multi_gpu, "start_processes", processes)
    out = tmp_path / "out.json"
    monkeypatch.setattr(sys, "argv", ["multi_gpu.py", "--data", str(tmp_path), "--gpus", "1,2",
                                      "--grouped", "--skip", "trainers,ddp", "--json", str(out)])
    assert multi_gpu.main() == 0
    one, two = json.loads(out.read_text())["producer"]
    assert "grouped" not in one
    assert two["grouped"]["gpus"] == 2 and two["grouped"]["rate"] > 0
    # Readers of the whole stream take no rank; the grouped ones rank and world size.
    name = started[2][0][0]
    assert started[1] == [[started[1][0][0], f"cuda:{i}", "256"] for i in range(2)]
    assert started[2] == [[name, f"cuda:{i}", "256", str(i), "2"] for i in range(2)]
    assert name.endswith("-grouped")


def test_by_round_robin_a_slow_ring_paces_the_others(monkeypatch, tmp_path, capsys):
    fake_gpus(monkeypatch)
    out = tmp_path / "out.json"
    monkeypatch.setattr(sys, "argv", ["multi_gpu.py", "--data", str(tmp_path), "--gpus", "1,2",
                                      "--skip", "trainers,ddp", "--server-option",
                                      "placement=round-robin", "--json", str(out)])
    assert multi_gpu.main() == 0
    rounds = json.loads(out.read_text())["producer"]
    assert [r["placement"] for r in rounds] == ["round-robin", "round-robin"]
    assert [r["paced_by"] for r in rounds] == [[], [1]]
    assert [r["given_less"] for r in rounds] == [[], []]
    assert rounds[1]["server_options"]["placement"] == "round-robin"
    waits = rounds[1]["turn_wait_share_per_ring"]
    assert waits[0] > 0 and waits[1] == 0  # ring 0 waited for its turn behind ring 1
    assert rounds[1]["read_ahead_miss_share_per_ring"] == [0.1, 0.0]  # 1 of its 10 batches
    printed = capsys.readouterr().out
    assert "; each ring waiting for its turn: " in printed
    assert "; batches not read ahead: 10%, 0% (MPS: off)" in printed
    assert [r["mps"] for r in rounds] == ["off", "off"]


def test_both_placements_in_turn_in_every_round(monkeypatch, tmp_path):
    fake_gpus(monkeypatch)
    out = tmp_path / "out.json"
    monkeypatch.setattr(sys, "argv", ["multi_gpu.py", "--data", str(tmp_path), "--gpus", "1,2",
                                      "--repeat", "2", "--placements", "round-robin,demand",
                                      "--separate", "--skip", "trainers,ddp", "--json", str(out)])
    assert multi_gpu.main() == 0
    rounds = json.loads(out.read_text())["producer"]
    # One GPU once per round (no placement to choose: the server's default),
    # then each placement.
    assert [(r["round"], r["gpus"], r["placement"]) for r in rounds] == [
        (k, g, p) for k in (0, 1)
        for g, p in ((1, "demand"), (2, "round-robin"), (2, "demand"))]
    for r in rounds:
        assert r["ratio"] > 0
        assert r["paced_by"] == ([1] if r["gpus"] > 1 and r["placement"] == "round-robin" else [])
        # The separate servers once per count: after its last placement.
        assert ("separate" in r) == (r["gpus"] > 1 and r["placement"] == "demand")
    monkeypatch.setattr(sys, "argv", ["multi_gpu.py", "--data", str(tmp_path), "--placements",
                                      "round-robin,bogus"])
    with pytest.raises(SystemExit):
        multi_gpu.main()


def test_the_ddp_rate_leaves_out_the_first_epoch():
    stdout = ("[rank 0] the node's server: rings cuda:all, MPS off\n"
              "epoch 0: 2 ranks, 78..78 batches per rank, 19968 images in 9.00 s = 2218.7 "
              "images/s in all\n"
              "epoch 0: split ok: 19968 samples read, 19968 distinct\n"
              "epoch 1: 2 ranks, 78..78 batches per rank, 19968 images in 4.00 s = 4992.0 "
              "images/s in all\n"
              "epoch 2: 2 ranks, 78..78 batches per rank, 19968 images in 4.32 s = 4622.2 "
              "images/s in all\n")
    rate, measured = multi_gpu.ddp_rate(stdout)
    assert measured == 2
    assert rate == pytest.approx(2 * 19968 / 8.32)
    assert multi_gpu.ddp_rate(stdout.split("epoch 1")[0]) == (0.0, 0)


# A trainer as TRAINER's protocol has it, without torch: trainer i starts
# 0.3 s after trainer i - 1 and measures 0.2 s longer; it prints when its
# window began and ended, and when it left.
STEPPED_TRAINER = r"""
import os, sys, time
i, warmup, seconds, sync = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
time.sleep(0.3 * i)
go, stop = os.path.join(sync, "go"), os.path.join(sync, "stop")
start, state = time.monotonic(), "warm-up"
while True:
    now = time.monotonic()
    if state == "warm-up" and now - start >= warmup:
        print("READY", flush=True)
        state = "ready"
    elif state == "ready" and os.path.exists(go):
        t0, state = now, "measuring"
        print("BEGAN", time.time(), flush=True)
    elif state == "measuring" and now - t0 >= seconds + 0.2 * i:
        print("WAIT 0.0", flush=True)
        print("ENDED", time.time(), flush=True)
        state = "measured"
    elif state == "measured" and os.path.exists(stop):
        print("LEFT", time.time(), flush=True)
        break
    time.sleep(0.005)
"""


def test_trainers_measure_one_window_begun_together_and_none_leaves_early(tmp_path):
    procs = multi_gpu.start_processes(3, STEPPED_TRAINER,
                                      lambda i: [str(i), "0.2", "0.3", str(tmp_path)])
    outs = multi_gpu.run_in_step(procs, str(tmp_path), timeout=60)
    assert [p.returncode for p in procs] == [0, 0, 0]

    def times(word):
        return [float(re.search(rf"^{word} ([0-9.]+)$", o, re.M).group(1)) for o in outs]
    began, ended, left = times("BEGAN"), times("ENDED"), times("LEFT")
    assert max(began) - min(began) < 0.4  # unaligned: 0.6 s apart (trainer 2 started later)
    assert min(left) >= max(ended)  # nobody left while another measured


def test_a_trainer_that_fails_before_its_window_is_an_error(tmp_path):
    procs = multi_gpu.start_processes(
        2, "import sys; print('no GPU here', flush=True); sys.exit(3)", lambda i: [])
    with pytest.raises(RuntimeError, match="exited 3 before go: no GPU here"):
        multi_gpu.run_in_step(procs, str(tmp_path), timeout=60)


def test_the_trainers_summary_gives_each_model_and_placements_range_over_the_rounds():
    def result(arch, placement, fed, decoding):
        return {"arch": arch, "placement": placement, "trainer_queues": "default", "ratio": fed,
                "ratio_attached": decoding}
    results = [result("resnet18", "demand", [0.84, 0.83], [0.90, 0.88]),
               result("resnet18", "round-robin", [0.86, 0.84], [0.95, 0.91]),
               result("resnet18", "demand", [0.76, 0.78], [0.86, 0.87]),
               result("resnet18", "round-robin", [0.74, 0.76], [0.82, 0.83]),
               result("resnet50", "demand", [0.91, 0.96], [0.97, 0.89])]
    assert multi_gpu.trainers_summary(results) == [
        {"arch": "resnet18", "placement": "demand", "trainer_queues": "default",
         "rounds": 2, "ratio": [0.76, 0.84], "ratio_attached": [0.86, 0.90]},
        {"arch": "resnet18", "placement": "round-robin", "trainer_queues": "default",
         "rounds": 2, "ratio": [0.74, 0.86], "ratio_attached": [0.82, 0.95]},
        {"arch": "resnet50", "placement": "demand", "trainer_queues": "default",
         "rounds": 1, "ratio": [0.91, 0.96], "ratio_attached": [0.89, 0.97]}]
    assert multi_gpu.trainers_summary([]) == []


def run_trainers_part(monkeypatch, tmp_path, *options):
    """multi_gpu.py's trainers part alone, two rounds of ResNet-18 on 2 GPUs
    with `options`: its JSON."""
    out = tmp_path / "out.json"
    monkeypatch.setattr(sys, "argv", ["multi_gpu.py", "--data", str(tmp_path), "--gpus", "2",
                                      "--skip", "producer,ddp", "--archs", "resnet18",
                                      "--repeat", "2", "--json", str(out), *options])
    assert multi_gpu.main() == 0
    return json.loads(out.read_text())


def trainer_result(g, arch, placement, fed, attached, queues="default"):
    """What trainer_rates returns for g trainers that each went at `fed`
    reading only and at `attached` decoding their rings."""
    return {"gpus": g, "arch": arch, "batch": 128, "placement": placement,
            "trainer_queues": queues, "fed": [fed] * g, "attached": [attached] * g,
            "wait_share": {"fed": [0.0] * g, "attached": [0.0] * g},
            "attached_decode_share": [1 / g] * g, "attached_turn_wait_share": [0.0] * g,
            "mps": "off"}


def test_the_trainers_part_runs_each_placement_in_turn_and_sums_up_the_rounds(
        monkeypatch, tmp_path, capsys):
    fake_gpus(monkeypatch)
    calls = []
    references = iter([100.0, 120.0, 80.0])  # the synthetic rates, run after run

    def at_once(args, g, arch, batch, source, produce=False):
        assert source == "synthetic"
        calls.append(source)
        return [next(references)] * g, [0.0] * g
    monkeypatch.setattr(multi_gpu, "trainers_at_once", at_once)

    def rates(binary, args, g, arch, batch, placement=None, queues=None):
        assert queues is None
        calls.append(placement)
        k = len([c for c in calls if c != "synthetic"])
        return trainer_result(g, arch, placement, 88.0 + k, 99.0 + k)
    monkeypatch.setattr(multi_gpu, "trainer_rates", rates)
    result = run_trainers_part(monkeypatch, tmp_path, "--placements", "demand,round-robin")
    # A synthetic reference before each round and after the last.
    assert calls == ["synthetic", "demand", "round-robin", "synthetic", "demand", "round-robin",
                     "synthetic"]
    first, _, third, _ = result["trainers"]
    # Round 1 against the mean of 100 and 120, round 2 of 120 and 80.
    assert first["synthetic_runs"] == [[100.0] * 2, [120.0] * 2]
    assert first["synthetic"] == [110.0] * 2
    assert first["ratio"] == pytest.approx([89 / 110] * 2)
    assert third["synthetic"] == [100.0] * 2
    assert third["ratio_attached"] == pytest.approx([1.02, 1.02])
    summary = result["trainers_summary"]
    assert [(t["placement"], t["rounds"]) for t in summary] == [("demand", 2), ("round-robin", 2)]
    assert summary[0]["ratio_attached"] == pytest.approx([100 / 110, 1.02])
    assert summary[0]["trainer_queues"] == "default"
    printed = capsys.readouterr().out
    assert "110 synthetic (100 before, 120 after)" in printed
    assert "placement round-robin, 2 rounds: reading only 0.82-0.92, decoding its ring " \
        "0.92-1.03 of synthetic" in printed


def test_trainer_processes_get_the_hardware_queues_asked_for(tmp_path):
    script = f"import os; print(os.environ.get({multi_gpu.QUEUES_ENV!r}, 'unset'), flush=True)"
    procs = multi_gpu.start_processes(2, script, lambda i: [], env={multi_gpu.QUEUES_ENV: "32"})
    assert [p.communicate()[0].strip() for p in procs] == ["32", "32"]
    procs = multi_gpu.start_processes(1, script, lambda i: [])
    assert procs[0].communicate()[0].strip() == os.environ.get(multi_gpu.QUEUES_ENV, "unset")


def test_the_trainers_part_runs_each_number_of_hardware_queues_in_turn(
        monkeypatch, tmp_path, capsys):
    fake_gpus(monkeypatch)
    calls = []

    def at_once(args, g, arch, batch, source, produce=False, queues=None):
        assert (source, queues) == ("synthetic", None)  # the reference: the environment's
        calls.append(source)
        return [100.0] * g, [0.0] * g
    monkeypatch.setattr(multi_gpu, "trainers_at_once", at_once)

    def rates(binary, args, g, arch, batch, placement=None, queues=None):
        calls.append((placement, queues))
        fed = 80.0 if queues == 8 else 90.0
        return trainer_result(g, arch, placement or "default", fed, fed + 5, queues or "default")
    monkeypatch.setattr(multi_gpu, "trainer_rates", rates)
    result = run_trainers_part(monkeypatch, tmp_path, "--trainer-queues", "8,32")
    assert calls == ["synthetic", (None, 8), (None, 32), "synthetic", (None, 8), (None, 32),
                     "synthetic"]
    summary = result["trainers_summary"]
    assert [(t["trainer_queues"], t["rounds"], t["ratio_attached"]) for t in summary] == [
        (8, 2, [0.85, 0.85]), (32, 2, [0.95, 0.95])]
    printed = capsys.readouterr().out
    assert "placement default, 32 hardware queues, one per GPU on 2 GPU(s)" in printed
    assert "placement default, 8 hardware queues, 2 rounds: reading only 0.80-0.80" in printed


@pytest.mark.parametrize("value", ["x", "0", "33,8"])
def test_the_trainer_queues_are_checked(monkeypatch, tmp_path, capsys, value):
    fake_gpus(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["multi_gpu.py", "--data", str(tmp_path),
                                      "--trainer-queues", value])
    with pytest.raises(SystemExit):
        multi_gpu.main()
    assert "--trainer-queues" in capsys.readouterr().err


def test_the_trainers_start_with_the_hardware_queues_asked_for(monkeypatch):
    envs = []

    def start(g, script, argv, env=None):
        envs.append(env)
        return [types.SimpleNamespace(returncode=0, poll=lambda: 0) for _ in range(g)]
    monkeypatch.setattr(multi_gpu, "start_processes", start)
    monkeypatch.setattr(multi_gpu, "run_in_step",
                        lambda procs, sync, timeout: ["RATE 10.0\nWAIT 0.5\n"] * len(procs))
    args = types.SimpleNamespace(warmup=5.0, seconds=6.0)
    assert multi_gpu.trainers_at_once(args, 2, "resnet18", 128, "srv", produce=True,
                                      queues=32) == ([10.0, 10.0], [0.5, 0.5])
    multi_gpu.trainers_at_once(args, 2, "resnet18", 128, "synthetic")
    assert envs == [{multi_gpu.QUEUES_ENV: "32"}, None]


def test_the_decoding_trainers_give_each_rings_wait_for_its_turn(monkeypatch):
    fake_gpus(monkeypatch)
    monkeypatch.setattr(multi_gpu, "trainers_at_once",
                        lambda *a, **k: ([100.0, 100.0], [0.0, 0.0]))
    r = multi_gpu.trainer_rates("server", types.SimpleNamespace(data="/data"), 2, "resnet18", 128)
    assert len(r["attached_turn_wait_share"]) == 2
    assert r["attached_turn_wait_share"][0] > 0 and r["attached_turn_wait_share"][1] == 0
