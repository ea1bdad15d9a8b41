"""The Prometheus endpoint (--metrics-port; docs/metrics.md) and each job's own
stall (Loader.stats()["loader"]), end to end: a real server scraped over
HTTP while Loaders read, its values checked against the stats JSON; the
endpoint refuses to listen beyond loopback without --allow-remote; scrapers
that connect and never read do not slow the stream; a Loader sees how
input-bound it is."""
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
SERVER = H.require_server()

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def parse(text):
    """{(name, ((label, value), ...)): value} of an exposition, checking that each
    sample's family has HELP and TYPE lines before it."""
    samples, typed, helped = {}, {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split(" ")[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            typed[name] = kind
        elif line:
            m = _SAMPLE.match(line)
            assert m, line
            name, labels, value = m.groups()
            assert name in typed and name in helped, line
            pairs = tuple(sorted((k, v.replace('\\"', '"').replace("\\\\", "\\"))
                                 for k, v in _LABEL.findall(labels or "")))
            samples[(name, pairs)] = float(value)
    return samples, typed


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode("utf-8")


def series(samples, name, **labels):
    """The samples of `name` whose labels include `labels`: {labels dict: value}."""
    want = set(labels.items())
    return {pairs: v for (n, pairs), v in samples.items() if n == name and want <= set(pairs)}


def one(samples, name, **labels):
    found = series(samples, name, **labels)
    assert len(found) == 1, (name, labels, found)
    return next(iter(found.values()))


class Readers:
    """Loaders reading in threads of this process until stop()."""

    def __init__(self, name, specs):
        self.loaders = [batchcast.Loader(name, **spec) for spec in specs]
        self.samples = [0] * len(self.loaders)
        self.longest_gap = [0.0] * len(self.loaders)
        self.errors = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._read, args=(i,), daemon=True)
                         for i in range(len(self.loaders))]
        for t in self._threads:
            t.start()

    def _read(self, i):
        try:
            last = time.monotonic()
            for images, _ in H.endless(self.loaders[i]):
                now = time.monotonic()
                self.longest_gap[i] = max(self.longest_gap[i], now - last)
                last = now
                self.samples[i] += images.shape[0]
                del images
                if self._stop.is_set():
                    return
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)

    def reset_gaps(self):
        self.longest_gap = [0.0] * len(self.loaders)

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(10)
        for loader in self.loaders:
            loader.close()
        assert not self.errors, self.errors


def metrics_url(name):
    return batchcast.query_stats(name)["metrics_endpoint"]


def test_scrape_agrees_with_the_stats_while_consumers_read():
    name = H.unique_name("metrics")
    with H.server_process(name, "--synthetic", 50000, "--size", 8, "--batch-size", 32,
                          "--window", 8, "--metrics-port", "any", log_level="info") as proc:
        url = metrics_url(name)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", url), url
        readers = Readers(name, [dict(batch_size=32, name="reader-a"),
                                 dict(batch_size=16, name='reader "b"', group="job", rank=0,
                                      world_size=1)])
        try:
            time.sleep(1.0)
            before = batchcast.query_stats(name)
            text = scrape(url)
            after = batchcast.query_stats(name)
            time.sleep(1.0)
            later, _ = parse(scrape(url))
        finally:
            readers.stop()
    s1, s2 = before, after
    samples, typed = parse(text)
    ring = dict(server=name, ring="cpu")
    # The producer's counters lie between the two stats read around the scrape.
    for metric, field in (("batchcast_samples_published_total", "samples_published"),
                          ("batchcast_batches_written_total", "batches_written"),
                          ("batchcast_producer_blocked_seconds_total", "producer_blocked_s")):
        assert typed[metric] == "counter"
        assert s1[field] <= one(samples, metric, **ring) <= s2[field], metric
    for stage in s1["producer_stage_s"]:
        v = one(samples, "batchcast_producer_stage_seconds_total", stage=stage, **ring)
        assert s1["producer_stage_s"][stage] <= v <= s2["producer_stage_s"][stage], stage
    assert one(samples, "batchcast_ring_capacity_slots", **ring) == s1["window"] == 8
    assert one(samples, "batchcast_ring_slot_samples", **ring) == 32
    assert one(samples, "batchcast_epoch_samples", **ring) == s1["epoch_len"]
    slots = {dict(p)["state"]: v
             for p, v in series(samples, "batchcast_ring_slots", **ring).items()}
    assert slots["free"] + slots["writing"] + slots["ready"] == 8
    assert slots["leased"] <= slots["ready"]
    assert typed["batchcast_ring_slots"] == "gauge"
    assert one(samples, "batchcast_consumers", **ring) == 2
    assert one(samples, "batchcast_server_info", server=name, version=batchcast.__version__) == 1
    # Per consumer: its wait, rate and lag, labelled by name, id, group and rank.
    by_id_1 = {c["id"]: c for c in s1["consumers"]}
    by_id_2 = {c["id"]: c for c in s2["consumers"]}
    for cid, c in by_id_1.items():
        labels = dict(consumer=c["name"], consumer_id=str(cid), **ring)
        if "group" in c:
            labels.update(group=c["group"], rank=str(c["rank"]))
        for metric, field in (("batchcast_consumer_wait_seconds_total", "wait_s"),
                              ("batchcast_consumer_samples_total", "samples"),
                              ("batchcast_consumer_batches_total", "batches")):
            v = one(samples, metric, **labels)
            assert c[field] <= v <= by_id_2[cid][field], (metric, c["name"])
        assert one(samples, "batchcast_consumer_lag_samples", **labels) >= 0
        assert one(samples, "batchcast_consumer_batch_samples", **labels) == c["batch_size"]
        # The rate: the samples counter grows while it reads.
        assert one(later, "batchcast_consumer_samples_total", **labels) > by_id_2[cid]["samples"]
    names = {dict(p)["consumer"] for p in series(samples, "batchcast_consumer_samples_total")}
    assert names == {"reader-a", 'reader "b"'}
    grouped = series(samples, "batchcast_consumer_samples_total", group="job", rank="0")
    assert len(grouped) == 1
    assert one(samples, "batchcast_group_state", group="job", state="running", **ring) == 1
    # The log says where the metrics are.
    assert f"metrics for Prometheus on {url}" in proc.output


def test_listening_beyond_loopback_needs_allow_remote():
    name = H.unique_name("metrics-remote")
    r = subprocess.run([SERVER, "serve", "--synthetic", "100", "--name", name,
                        "--metrics-port", "0.0.0.0:any"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2, r
    assert "0.0.0.0:any" in r.stderr and "--allow-remote" in r.stderr, r.stderr
    with pytest.raises(batchcast.InvalidArgument, match="allow_remote"):
        batchcast.Server(synthetic=100, size=8, name=name, metrics_port="*:any")
    with pytest.raises(batchcast.InvalidArgument, match="metrics_port"):
        batchcast.Server(synthetic=100, size=8, name=name, metrics_port=True)
    other = _non_loopback_address()
    # With --allow-remote: every interface.
    with H.server_process(name, "--synthetic", 1000, "--size", 8, "--metrics-port", "0.0.0.0:any",
                          "--allow-remote"):
        url = metrics_url(name)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        assert url == f"http://0.0.0.0:{port}/metrics"
        assert "batchcast_uptime_seconds" in scrape(f"http://127.0.0.1:{port}/metrics")
        if other:
            assert "batchcast_uptime_seconds" in scrape(f"http://{other}:{port}/metrics")
    # Without: loopback only.
    with batchcast.Server(synthetic=1000, size=8, name=name, metrics_port="any") as server:
        url = server.stats()["metrics_endpoint"]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        assert "batchcast_uptime_seconds" in scrape(url)
        if other:
            with pytest.raises((ConnectionRefusedError, urllib.error.URLError)):
                scrape(f"http://{other}:{port}/metrics")


def _non_loopback_address():
    """An IPv4 address of this machine beyond loopback, or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.255", 1))  # no packet is sent
        address = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if address.startswith("127.") else address


def test_a_python_server_takes_a_port_number():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    name = H.unique_name("metrics-int")
    with batchcast.Server(synthetic=1000, size=8, name=name, metrics_port=port) as server:
        assert server.stats()["metrics_endpoint"] == f"http://127.0.0.1:{port}/metrics"
        assert f'batchcast_uptime_seconds{{server="{name}"}}' in scrape(
            f"http://127.0.0.1:{port}/metrics")
    with batchcast.Server(synthetic=1000, size=8, name=name) as server:
        assert "metrics_endpoint" not in server.stats()


def _read_for(readers, seconds):
    """(samples/s of the first reader over `seconds`, its longest wait between batches)."""
    readers.reset_gaps()
    start, t0 = readers.samples[0], time.monotonic()
    time.sleep(seconds)
    return (readers.samples[0] - start) / (time.monotonic() - t0), readers.longest_gap[0]


def test_scrapers_that_never_read_do_not_slow_the_stream():
    name = H.unique_name("metrics-stall")
    with H.server_process(name, "--synthetic", 100000, "--size", 8, "--batch-size", 64,
                          "--window", 8, "--metrics-port", "any"):
        url = metrics_url(name)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        readers = Readers(name, [dict(batch_size=64, name="reader")])
        idle = []
        stop = threading.Event()

        def stall():
            # Connections that never send a request and ones that ask and never
            # read, more than the endpoint's workers, queue and backlog take.
            for i in range(40):
                if stop.is_set():
                    return
                try:
                    c = socket.socket()
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    c.settimeout(1.0)
                    c.connect(("127.0.0.1", port))
                    if i % 2:
                        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                    idle.append(c)
                except OSError:
                    c.close()

        def scrape_often():
            while not stop.is_set():
                try:
                    scrape(url)
                except OSError:
                    pass
                time.sleep(0.02)

        try:
            time.sleep(0.5)
            base_rate, base_gap = _read_for(readers, 2.0)
            threads = [threading.Thread(target=f, daemon=True) for f in (stall, scrape_often)]
            for t in threads:
                t.start()
            rate, gap = _read_for(readers, 3.0)
            established = len(idle)
        finally:
            stop.set()
            for c in idle:
                c.close()
            readers.stop()
        assert established > 10, established  # more than the workers and the queue take
        assert base_rate > 0
        # The server is not slowed; this process and the machine's other load
        # make the figures noisy, hence the wide bounds.
        assert rate >= 0.3 * base_rate, (rate, base_rate)
        assert gap < 1.0, (gap, base_gap)
        # Once they are gone the endpoint answers again.
        deadline = time.monotonic() + 15
        while True:
            try:
                assert "batchcast_uptime_seconds" in scrape(url)
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)


def test_a_loader_sees_its_own_stall():
    # Input-bound: a producer that makes a batch every 0.1 s.
    torch = pytest.importorskip("torch")

    def slow_batches():
        for _ in range(40):
            time.sleep(0.1)
            yield torch.zeros(8, 4)

    name = H.unique_name("stall")
    with batchcast.Producer(slow_batches(), name=name, epoch_len=320, epochs=1, window=4):
        loader = batchcast.Loader(name, batch_size=8)
        first = loader.stats(server=False)
        assert set(first) == {"loader"}
        with pytest.raises(batchcast.InvalidArgument, match="server"):
            loader.stats(server="no")
        assert set(first["loader"]) == {"wait_s", "wall_s", "wait_fraction"}
        for i, _ in enumerate(loader):
            if i == 8:
                break
        share = loader.stats()
        assert share["name"] == name  # the server's stats, with the loader's own
        assert share["loader"]["wait_fraction"] > 0.5, share["loader"]
        assert 0 < share["loader"]["wait_s"] <= share["loader"]["wall_s"]
        loader.close()
    # Not input-bound: a fast server, a slow trainer.
    name = H.unique_name("nostall")
    with batchcast.Server(synthetic=10000, size=8, name=name, batch_size=16):
        loader = batchcast.Loader(name, batch_size=16)
        for i, _ in enumerate(loader):
            if i == 0:
                loader.stats(server=False)  # the interval starts with the reading
            time.sleep(0.03)
            if i == 20:
                break
        share = loader.stats(server=False)["loader"]
        assert share["wait_fraction"] < 0.3, share
        assert share["wall_s"] >= 0.5
        loader.close()


def test_the_launchers_status_line_shows_each_jobs_wait():
    from batchcast import _launch_jobs

    class FakeJob:
        def __init__(self, index, pid):
            self.index, self.pid, self.exit_status = index, pid, None

        def poll(self):
            return None

    me = os.getpid()
    jobs = [FakeJob(0, me), FakeJob(1, me + 10 ** 7)]  # job 1 has no consumer
    rates = _launch_jobs.Rates(jobs)

    def stats(samples, wait_s):
        return {"samples_published": samples, "consumers": [
            {"id": 1, "pid": me, "samples": samples, "wait_s": wait_s, "attached": True},
            {"id": 2, "pid": me, "samples": samples, "wait_s": 0.0, "attached": True}]}

    assert rates.update(stats(0, 0.0), 10.0) == (None, {}, {})
    server_rate, job_rates, job_waits = rates.update(stats(1000, 1.6), 12.0)
    assert server_rate == 500 and job_rates == {0: 1000}
    # Its two consumers waited 80% and 0% of the interval.
    assert job_waits == {0: pytest.approx(0.4)}
    line = _launch_jobs.status_text(65, server_rate, job_rates, jobs, False, job_waits)
    assert "jobs: 0 1,000 wait 40% | 1 -" in line, line


_JOB = '''
import sys, time
import batchcast
loader = batchcast.Loader(sys.argv[1], batch_size=32)
end = time.monotonic() + 2.0
while time.monotonic() < end:
    for _ in loader:
        if time.monotonic() > end:
            break
print("input-bound", loader.stats(server=False)["loader"]["wait_fraction"])
'''


def test_the_launcher_serves_metrics_and_shows_each_jobs_wait(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(_JOB)
    r = subprocess.run([sys.executable, "-m", "batchcast.launch", "--synthetic", "4096", "--size",
                        "8", "--batch-size", "32", "--workers", "1", "--mps", "off",
                        "--metrics-port", "any", "--status-interval", "0.3", "--jobs", "1", "--",
                        sys.executable, str(job), "{name}"],
                       env=H.python_env(drop=("CUDA_MPS_PIPE_DIRECTORY",)), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"\[launch\] metrics for Prometheus on http://127\.0\.0\.1:\d+/metrics",
                     r.stderr), r.stderr
    assert re.search(r"jobs: 0 [\d,]+ wait \d+%", r.stderr), r.stderr
    assert re.search(r"\[job 0\] input-bound [\d.]+", r.stdout), r.stdout
