"""batchcast on a CUDA ring (server device cuda:0): the Loader, Producer and
example checks of test_loader.py / test_producer.py with CUDA tensors.

Runs on the GPU host; skips cleanly without a CUDA device or without a CUDA
build of batchcast.
"""
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
import torch  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

SIZE = 16


def _cuda_server(**kw):
    try:
        return batchcast.Server(synthetic=1000, size=SIZE, device="cuda:0", **kw)
    except batchcast.InvalidArgument as e:
        if "no CUDA support" in str(e):
            pytest.skip(f"this build has no CUDA ring: {e}")
        raise


def test_exactly_once_three_loaders_in_processes_on_a_cuda_ring():
    H.require_server()
    name = H.unique_name("cuda-once")
    ctx = multiprocessing.get_context("spawn")
    specs = {"b32": 32, "b48": 48, "b100": 100}
    with H.server_process(name, "--synthetic", 1000, "--size", SIZE, "--batch-size", 64,
                          "--window", 4, "--min-consumers", 3, "--epochs", 2, "--device", "cuda:0",
                          timeout=60):
        queue = ctx.Queue()
        procs = {tag: ctx.Process(target=H.consumer_main,
                                  args=(tag, name, b, False, "next_epoch", SIZE, 2, queue, None,
                                        "cuda"))
                 for tag, b in specs.items()}
        with H.running(procs):
            messages = H.collect(queue, procs, timeout=120)
    for tag, b in specs.items():
        msgs = messages[tag]
        assert not [m for m in msgs if m[0] == "error"], msgs
        epochs = [m for m in msgs if m[0] == "epoch"]
        assert [m[1] for m in epochs] == [0, 1]
        for _, _epoch, length, batches, indices in epochs:
            assert length == batches == -(-1000 // b)
            assert sorted(indices) == list(range(1000))
        assert msgs[-1][0] == "end"


def test_cuda_tensors_view_the_ring_and_held_ones_keep_their_values():
    with _cuda_server(name=H.unique_name("cuda-ring"), batch_size=64, window=8,
                      min_consumers=2) as server:
        holder = batchcast.Loader(server.endpoint, batch_size=64, timeout=30)
        other = batchcast.Loader(server.endpoint, batch_size=64, timeout=30)
        it = H.endless(holder)
        held_images, held_labels = next(it)
        assert held_images.is_cuda and held_images.device.index == 0
        reference = held_images.clone()
        idx = holder.indices.numpy().copy()
        H.check_synthetic_batch(held_images, held_labels, idx, SIZE)
        # Zero copy: batch-64 views sit at slot strides of one allocation and
        # repeat modulo the window.
        ptrs = []
        sums = []
        stream = torch.cuda.current_stream()
        for n, (images, labels) in enumerate(H.endless(other)):
            next(it)  # the holder reads on (its cursor moves) but keeps batch 0
            ptrs.append(images.data_ptr())
            # Kernels on the consumer's stream keep reading the held batch.
            sums.append(held_images.float().sum())
            if n == 60:
                break
        stream.synchronize()
        stride = 64 * 3 * SIZE * SIZE
        base = min(ptrs)
        assert all((p - base) % stride == 0 for p in ptrs), "views are not slots of one ring"
        assert len(set(ptrs)) <= 8
        assert torch.equal(held_images, reference), "a held CUDA batch changed"
        assert all(float(s) == float(sums[0]) for s in sums)
        del holder, other


def test_producer_with_cuda_tensors_reaches_two_loaders_identically():
    data = torch.arange(200 * 6, dtype=torch.float32).reshape(200, 6)
    labels = torch.arange(200)
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data, labels), batch_size=20,
                                     shuffle=True)
    name = H.unique_name("cuda-producer")
    try:
        producer = batchcast.Producer(dl, device="cuda:0", name=name, window=4, epochs=1)
    except batchcast.InvalidArgument as e:
        if "no CUDA support" in str(e):
            pytest.skip(str(e))
        raise
    with producer:
        got = {}

        def read(tag):
            loader = batchcast.Loader(name, batch_size=20, join="next_epoch", timeout=30)
            got[tag] = [(x.cpu().clone(), y.cpu().clone(), x.is_cuda) for x, y in loader]

        threads = [threading.Thread(target=read, args=(t,)) for t in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert len(got["a"]) == len(got["b"]) == 10
    for (xa, ya, ca), (xb, yb, cb) in zip(got["a"], got["b"]):
        assert ca and cb
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
        assert torch.equal(xa, data[ya])
    assert sorted(torch.cat([y for _, y, _ in got["a"]]).tolist()) == list(range(200))


def test_train_resnet_example_runs_with_shared_on_cuda():
    H.require_server()
    name = H.unique_name("cuda-train")
    with H.server_process(name, "--synthetic", 512, "--size", 64, "--batch-size", 32, "--window",
                          8, "--device", "cuda:0", timeout=60):
        r = subprocess.run([sys.executable, os.path.join(H.REPO, "examples", "train_resnet.py"),
                            "--shared", name, "--batch-size", "32", "--steps", "5", "--epochs",
                            "1", "--device", "cuda", "--size", "64"],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "images/s" in r.stdout, r.stdout


def test_in_process_gpu_server_starts_cuda_with_32_hardware_queues_or_warns():
    # Note [Hardware queues], in fresh interpreters with the variable unset:
    # a Server created before other CUDA work sets CUDA_DEVICE_MAX_CONNECTIONS
    # for the CUDA start it makes and restores it (processes started later
    # keep CUDA's default); CUDA started first (torch): one RuntimeWarning.
    def start(torch_first):
        code = ("import os, warnings, torch\n"
                + ("torch.zeros(1, device='cuda')\n" if torch_first else "")
                + "import batchcast\n"
                "seen = []\n"
                "real = batchcast._core.Server.start\n"
                "def spy(opts, *rest):\n"
                "    seen.append(os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'))\n"
                "    return real(opts, *rest)\n"
                "batchcast._core.Server.start = spy\n"
                "with warnings.catch_warnings(record=True) as w:\n"
                "    warnings.simplefilter('always')\n"
                f"    batchcast.Server(synthetic=100, size=8, device='cuda:0',\n"
                f"                     name='{H.unique_name('queues')}').close()\n"
                "torch.zeros(1, device='cuda')\n"
                "print(seen[0], os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'),\n"
                "      sum('hardware queue' in str(x.message) for x in w))")
        r = subprocess.run([sys.executable, "-c", code],
                           env=H.python_env(drop=("CUDA_DEVICE_MAX_CONNECTIONS",)),
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0 and "no CUDA support" in r.stderr:
            pytest.skip("this build has no CUDA ring")
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.split()[-3:]

    # During the start / after it / warnings.
    assert start(torch_first=False) == ["32", "None", "0"]
    assert start(torch_first=True) == ["None", "None", "1"]


def test_server_process_without_mps_gives_its_advice():
    # batchcast-server on a GPU says at start, when MPS is off, that a
    # trainer it feeds gets the GPU by time slices, and what to do instead;
    # not when MPS is on.
    server_bin = H.require_server()
    name = H.unique_name("mps-advice")
    p = subprocess.Popen([server_bin, "serve", "--synthetic", "100", "--size", "8", "--name", name,
                          "--device", "cuda:0", "--status-interval", "0"],
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        stats = None
        while stats is None and time.monotonic() < deadline and p.poll() is None:
            try:
                stats = batchcast.query_stats(name, timeout=1.0)
            except (batchcast.NotFound, batchcast.Timeout, batchcast.ServerUnavailable):
                time.sleep(0.2)  # not up yet
    finally:
        p.terminate()
        err = p.communicate(timeout=30)[1]
    if "no CUDA support" in err:
        pytest.skip("this build has no CUDA ring")
    assert stats is not None, err
    advised = "MPS is off, so a trainer on this GPU fed from this process" in err
    assert advised == (stats.get("mps") is False), (stats.get("mps"), err)
    if advised:  # both ways out: the server in the process, or MPS / a hosting job
        assert "run the server in the training process" in err, err
        assert "host the server in one of the jobs" in err, err


def test_launcher_without_mps_gives_its_advice():
    # batchcast-launch with its server on a GPU and MPS off says what to do
    # instead (start MPS, or host the server in a job), exactly when the
    # server's stats say MPS is off; each job prints what the stats say.
    job = ("import sys, batchcast; "
           "print('mps', batchcast.query_stats(sys.argv[1]).get('mps'))")
    r = subprocess.run([sys.executable, "-m", "batchcast.launch", "--synthetic", "256", "--size",
                        "8", "--device", "cuda:0", "--mps", "off", "--jobs", "2", "--",
                        sys.executable, "-c", job, "{name}"],
                       env=H.python_env(drop=("CUDA_MPS_PIPE_DIRECTORY",)), capture_output=True,
                       text=True, timeout=120)
    if "no CUDA support" in r.stderr:
        pytest.skip("this build has no CUDA ring")
    assert r.returncode == 0, r.stdout + r.stderr
    said = {line.split()[-1] for line in r.stdout.splitlines() if line.startswith("[job ")}
    assert len(said) == 1, r.stdout
    advised = "[launch] MPS is off, so the GPU time-slices" in r.stderr
    assert advised == (said == {"False"}), (said, r.stderr)
    if advised:
        assert "host the server in one of the jobs" in r.stderr, r.stderr
