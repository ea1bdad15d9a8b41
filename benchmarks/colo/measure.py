"""The matrix and its measurements: MPS settings, job counts, models, sources.

For each MPS setting and N, the job processes are started once (a model
change rebuilds the model); each phase (model, source, batch sizes) sets
them up, starts them together at t0, and reads the CPU of the loading
processes and of the jobs at the timed window's ends (bench_proc), GPU
memory (nvidia-smi) and the server's stats. With --repeat R every phase of
a model is measured R times, round after round (each round measures every
source once), so that the sources of a round see the same state of the
machine; a row keeps every round (its "repeats") and gives its median
round's figures and their ranges (combine()).
"""
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple, Union

from bench_proc import CpuMeter, descendants
from colo.jobs import JobProc
from colo.report import compute_deltas, demo_row, row_text
from colo.sources import SERVED, HostedServer, Server, server_options

# The figures of a row given as a range over its repeats.
RANGED = ("img_s", "step_s_max", "loading_cores", "jobs_cores")


def gpu_memory_by_pid() -> Optional[Dict[int, float]]:
    """{pid: MiB} from nvidia-smi (None where it is missing or fails)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        r = subprocess.run([smi, "--query-compute-apps=pid,used_memory",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = {}
    for line in r.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            try:
                out[int(parts[0])] = float(parts[1])
            except ValueError:
                pass
    return out


def sleep_until(t: float) -> None:
    while True:
        left = t - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


def compact_stats(s: Dict[str, Any]) -> Dict[str, Any]:
    """The part of a server's stats a person reads: rate inputs, ring, consumers."""
    return {"samples_published": s.get("samples_published"), "slots": s.get("slots"),
            "producer_blocked_s": s.get("producer_blocked_s"),
            "slowest_lag_slots": s.get("slowest_lag_slots"),
            "consumers": [{k: c.get(k) for k in ("name", "batch_size", "samples", "lag_samples",
                                                 "leases")} for c in s.get("consumers", [])]}


def combine(row: Dict[str, Any]) -> None:
    """Sets a row's figures from its repeats: those of its median repeat (by
    images/s of all jobs), with the range of each RANGED figure over the
    repeats that measured (row["range"]); an error only if none did."""
    done = [r for r in row["repeats"] if not r.get("error")]
    keep = {"repeats": row["repeats"]}
    row.clear()
    if not done:
        row.update(keep["repeats"][-1], **keep)
        return
    median = sorted(done, key=lambda r: r["img_s"])[(len(done) - 1) // 2]
    row.update(median, **keep)
    row["range"] = {k: [min(r[k] for r in done), max(r[k] for r in done)] for k in RANGED}
    row["failed_repeats"] = len(row["repeats"]) - len(done)


class Bench:
    def __init__(self, args: Any, started: float) -> None:
        self.args = args
        self.start = started
        self.results: Dict[str, Any] = {"meta": self._meta(), "mps": {}, "runs": []}
        os.makedirs(args.out, exist_ok=True)
        self.job_log = open(os.path.join(args.out, "colocate-jobs.log"), "a")
        self.server_log = open(os.path.join(args.out, "colocate-server.log"), "a")

    def _meta(self) -> Dict[str, Any]:
        a = self.args
        return {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "host": os.uname().nodename,
                "cores": a.cores, "device": a.device, "size": a.size, "amp_bf16": a.amp,
                "data": a.data, "images": a.images, "warmup_s": a.warmup, "measure_s": a.measure,
                "repeat": a.repeat, "server": server_options(a),
                "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])}

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def over_budget(self, need: float) -> bool:
        return bool(self.args.budget) and self.elapsed() + need > self.args.budget

    def phase_seconds(self) -> float:
        return self.args.warmup + self.args.measure + 3.0

    def save(self) -> None:
        compute_deltas(self.results["runs"])
        path = os.path.join(self.args.out, "colocate.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self.results, f, indent=1)
        os.replace(path + ".tmp", path)

    def record(self, measured: Dict[str, Any]) -> Dict[str, Any]:
        """Adds one measurement to its row (a repeat of it), saves, and returns the row."""
        key = ("mps", "model", "source", "jobs", "batch_sizes")
        row = next((r for r in self.results["runs"]
                    if all(r[k] == measured[k] for k in key)), None)
        if row is None:
            row = {"repeats": []}
            self.results["runs"].append(row)
        row["repeats"].append(measured)
        combine(row)
        self.save()
        return row

    # ---- the matrix ----

    def run(self) -> None:
        for mode in self.args.mps:
            self.run_mps(mode)
        self.save()

    def run_mps(self, mode: str) -> None:
        from batchcast._mps import Mps

        try:
            mps = Mps.start("on" if mode == "on" else "off")
        except RuntimeError as e:
            self.results["mps"][mode] = f"not measured: {e}"
            print(f"MPS {mode}: not measured: {e}", flush=True)
            return
        self.results["mps"][mode] = mps.note
        if not self.args.demo:
            print(f"== MPS {mode}: {mps.note}", flush=True)
        env = {**os.environ, **mps.env, "PYTHONUNBUFFERED": "1",
               "OMP_NUM_THREADS": str(self.args.threads)}
        server = None
        try:
            if "batchcast" in self.args.sources:  # hosted: Bench.start_hosted
                server = Server(self.args, env, self.server_log)
            for n in self.args.jobs:
                if self.over_budget(8 + self.phase_seconds()):
                    print(f"budget: skipping N={n} and above (MPS {mode})", flush=True)
                    break
                self.run_jobs(mode, mps, n, env, server)
        except Exception as e:  # noqa: BLE001 - keep what was measured, say what failed
            self.results["mps"][mode] += f"; stopped by {type(e).__name__}: {e}"
            print(f"MPS {mode}: stopped by {type(e).__name__}: {e}", flush=True)
        finally:
            if server is not None:
                server.stop()
            mps.stop()

    def run_jobs(self, mode: str, mps: Any, n: int, env: Dict[str, str],
                 server: Optional[Server]) -> None:
        a = self.args
        procs = [JobProc(k, env, self.job_log) for k in range(n)]
        # (procs, HostedServer) of source "hosted", started at its first row,
        # or why they did not start.
        hosted: Union[None, str, Tuple[List[JobProc], HostedServer]] = None
        try:
            hellos = [p.recv(300) for p in procs]
            bad = [h for h in hellos if "error" in h]
            if bad:
                print(f"N={n}: jobs did not start: {bad[0]['error']}", flush=True)
                return
            self.results["meta"].setdefault("torch", hellos[0].get("torch"))
            self.results["meta"].setdefault("gpu", hellos[0].get("gpu"))
            self.warm_up(server, procs[0])
            for model in a.models:
                sizes = a.batch_sizes[model]
                variants = [[sizes[k % len(sizes)] for k in range(n)]]
                if n == 1 and max(a.jobs) > 1:  # alone references for every batch size dealt
                    variants = [[b] for b in dict.fromkeys(sizes)]
                for rnd in range(a.repeat):
                    for batches in variants:
                        for source in a.sources:
                            if self.over_budget(self.phase_seconds()):
                                print(f"budget: skipping {model} {source} N={n} (MPS {mode})",
                                      flush=True)
                                continue
                            if source == "hosted" and hosted is None:
                                hosted = self.start_hosted(n, env)
                            if source != "hosted":
                                run = self.phase(mode, mps, model, source, batches, procs, server)
                            elif isinstance(hosted, str):  # the hosting job failed: every row
                                run = {"mps": mode, "model": model, "source": source, "jobs": n,
                                       "batch_sizes": batches, "dl_workers": None,
                                       "error": hosted}
                            else:
                                run = self.phase(mode, mps, model, source, batches, *hosted)
                            row = self.record(run)
                            if a.demo:
                                print(demo_row(run), flush=True)
                            elif a.repeat == 1:
                                print(row_text(row), flush=True)
                            else:  # this round's figures (no delta: that is the median's)
                                print(f"round {rnd + 1}/{a.repeat}: {row_text(run)}", flush=True)
        finally:
            for p in procs + (hosted[0] if isinstance(hosted, tuple) else []):
                p.stop()

    def warm_up(self, server: Optional[Server], job: JobProc) -> None:
        """One epoch through `server` (by `job`) before it is measured."""
        if server is not None and not server.warm:
            job.send(cmd="drain", endpoint=server.name, batch_size=self.args.server_batch,
                     samples=server.epoch_len)
            r = job.recv(600)
            server.warm = True
            print(f"server warm-up: {r}", flush=True)

    def start_hosted(self, n: int, env: Dict[str, str]
                     ) -> Union[str, Tuple[List[JobProc], HostedServer]]:
        """([n job processes], HostedServer), job 0 hosting the server (source
        "hosted"); or, where they did not start, why (a string)."""
        a = self.args
        name = f"colocate-hosted-{os.getpid()}-{n}"
        host = {"data": a.data, "name": name, **server_options(a)}
        procs = [JobProc(k, env, self.job_log, host=host if k == 0 else None) for k in range(n)]
        try:
            bad = [h["error"] for h in (p.recv(300) for p in procs) if "error" in h]
            if bad:
                raise RuntimeError(bad[0])
            server = HostedServer(a, name, procs[0])
            self.warm_up(server, procs[0])
        except Exception as e:  # noqa: BLE001 - every hosted row says why
            for p in procs:
                p.stop()
            print(f"N={n}: the hosting jobs did not start: {e}", flush=True)
            return f"the hosting jobs did not start: {e}"
        return procs, server

    def phase(self, mode: str, mps: Any, model: str, source: str, batches: List[int],
              procs: List[JobProc], server: Optional[Server]) -> Dict[str, Any]:
        a = self.args
        n = len(procs)
        workers = a.dl_workers if a.dl_workers is not None else max(1, (a.cores - n) // n)
        run: Dict[str, Any] = {"mps": mode, "model": model, "source": source, "jobs": n,
                               "batch_sizes": batches,
                               "dl_workers": workers if source == "dataloader" else None,
                               "error": None}
        for k, p in enumerate(procs):
            cfg = {"index": k, "model": model, "batch_size": batches[k], "source": source,
                   "device": a.device, "size": a.size, "amp": a.amp, "threads": a.threads,
                   "data": a.data, "workers": workers,
                   "endpoint": server.name if server else None, "setup_steps": a.setup_steps}
            p.send(cmd="setup", cfg=cfg)
        ready = [p.recv(600) for p in procs]
        errors = [r["error"] for r in ready if "error" in r]
        if errors:
            for p, r in zip(procs, ready):
                if "error" not in r:
                    p.send(cmd="skip")
                    p.recv(60)
            run["error"] = errors[0]
            return run
        t0 = time.monotonic() + 0.2
        for p in procs:
            p.send(cmd="go", t0=t0, warmup=a.warmup, measure=a.measure)
        job_pids = [p.pid for p in procs]
        on_gpu = a.device.startswith("cuda")
        sleep_until(t0 + 0.3 * a.warmup)
        # Before the timed window (these fork processes): GPU memory, MPS servers,
        # and what `batchcast-server stat` shows while the jobs run.
        smi = gpu_memory_by_pid() if on_gpu else None
        mps_servers = mps.server_pids()
        served = server if source in SERVED else None
        stat_text = served.stat_text() if served else None
        ws, we = t0 + a.warmup, t0 + a.warmup + a.measure
        sleep_until(ws)
        before = self.cpu_reading(job_pids, served)
        stats0 = served.stats() if served else None
        sleep_until(we)
        after = self.cpu_reading(job_pids, served)
        stats1 = served.stats() if served else None
        results = [p.recv(max(120.0, 20 * a.measure)) for p in procs]
        errors = [r["error"] for r in results if "error" in r]
        if errors:
            run["error"] = errors[0]
            return run
        span = after["t"] - before["t"]
        run["loading_cores"] = (CpuMeter.used(before["loading"], after["loading"]) / span
                                if source != "synthetic" else 0.0)
        run["jobs_cores"] = CpuMeter.used(before["jobs"], after["jobs"]) / span
        run["mps_active"] = bool(mps_servers) if mode == "on" else False
        for k, r in enumerate(results):
            r["gpu_mib_smi"] = smi.get(job_pids[k]) if smi else None
            r["cpu_cores"] = (after["jobs"].get(job_pids[k], 0) -
                              before["jobs"].get(job_pids[k], 0)) / span
        run["job"] = results
        run["img_s"] = sum(r["img_s"] for r in results)
        run["step_s_max"] = max(r["step_s"] for r in results)
        if smi:
            run["gpu_mib_total"] = sum(smi.values())
            if source == "batchcast":  # the server idles (but stays) during other rows
                run["server_gpu_mib_smi"] = smi.get(server.pid)  # hosted: in job 0's
        if stats0 is not None and stats1 is not None:
            run["server_samples_s"] = ((stats1["samples_published"] - stats0["samples_published"])
                                       / max(1e-9, span))
            run["server_blocked_frac"] = ((stats1["producer_blocked_s"] -
                                           stats0["producer_blocked_s"]) / max(1e-9, span))
            run["server_stats"] = compact_stats(stats1)
            run["server_stat_text"] = stat_text
        return run

    @staticmethod
    def cpu_reading(job_pids: List[int], server: Optional[Server]) -> Dict[str, Any]:
        """CPU seconds now: of the jobs, and of the loading (the server, or the
        jobs' DataLoader workers)."""
        loading = (server.loading_cpu() if server is not None else
                   CpuMeter.read(descendants(job_pids)))
        return {"t": time.monotonic(), "jobs": CpuMeter.read(job_pids), "loading": loading}
