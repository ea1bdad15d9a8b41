"""What a co-location run writes: derived figures, the table, the summary, plots.

A row ("run") is one (MPS, model, source, N, batch sizes) with its repeats
(colo/measure.py); its figures are its median repeat's, and with several
repeats each is given with its range. Rows of result files written before
repeats existed read as rows of one repeat.
"""
import json
import os
import statistics
from typing import Any, Dict, List, Optional, Sequence, Union

from colo.sources import SERVED, SOURCES


def compute_deltas(runs: List[Dict[str, Any]]) -> None:
    """delta = sum_k alone(job k) / max_k step(job k), alone = the N=1 run of the same
    (MPS, model, source, batch size); None where that run is missing."""
    alone = {}
    for r in runs:
        if r.get("jobs") == 1 and not r.get("error"):
            alone[(r["mps"], r["model"], r["source"], r["batch_sizes"][0])] = r["job"][0]["step_s"]
    for r in runs:
        if r.get("error"):
            r["delta"] = None
            continue
        refs = [alone.get((r["mps"], r["model"], r["source"], b)) for b in r["batch_sizes"]]
        r["delta"] = None if None in refs else sum(refs) / r["step_s_max"]


def _key(r: Dict[str, Any], source: Optional[str] = None) -> tuple:
    return (r["mps"], r["model"], source or r["source"], r["jobs"], tuple(r["batch_sizes"]))


def ratios(row: Dict[str, Any], other: Optional[Dict[str, Any]]) -> List[float]:
    """Images/s of `row` over those of `other` (e.g. its synthetic row), repeat
    by repeat (the repeats of one round were measured back to back)."""
    if other is None or row.get("error") or other.get("error"):
        return []
    pairs = zip(row.get("repeats", [row]), other.get("repeats", [other]))
    return [a["img_s"] / b["img_s"] for a, b in pairs if not a.get("error") and not b.get("error")]


def _fmt(v: Optional[float], spec: str = ",.0f", none: str = "-") -> str:
    return none if v is None else format(v, spec)


def _ranged(r: Dict[str, Any], key: str, spec: str = ",.0f", scale: float = 1.0) -> str:
    """A row's figure, with its range over the repeats where there are several."""
    text = format(r[key] * scale, spec)
    lo_hi = r.get("range", {}).get(key)
    if lo_hi and len(r.get("repeats", ())) > 1:
        text += f" ({format(lo_hi[0] * scale, spec)}-{format(lo_hi[1] * scale, spec)})"
    return text


def _ratio_text(values: Sequence[float], spec: str = ".2f", scale: float = 1.0) -> str:
    """The median of `values`, with their range where there are several."""
    if not values:
        return "-"
    text = format(statistics.median(values) * scale, spec)
    if len(values) > 1:
        text += f" ({format(min(values) * scale, spec)}-{format(max(values) * scale, spec)})"
    return text


def row_text(r: Dict[str, Any]) -> str:
    """One measurement, as it is printed while the run goes on."""
    head = f"MPS {r['mps']:<3} {r['model']:<10} {r['source']:<10} N={r['jobs']}"
    if r.get("error"):
        return f"{head}  error: {r['error']}"
    per = " ".join(_fmt(j["img_s"]) for j in r["job"])
    return (f"{head}  {_fmt(r['img_s']):>7} img/s ({per})  step {r['step_s_max'] * 1e3:.1f} ms  "
            f"delta {_fmt(r.get('delta'), '.2f')}  loading {r['loading_cores']:.1f} cores  "
            f"jobs {r['jobs_cores']:.1f} cores")


def _gpu_mem(r: Dict[str, Any]) -> str:
    smi = [j.get("gpu_mib_smi") for j in r["job"]]
    torch_mib = [j.get("torch_peak_mib") for j in r["job"]]
    parts = []
    if all(v is not None for v in smi) and smi:
        parts.append(f"{max(smi):,.0f}")
    if all(v is not None for v in torch_mib) and torch_mib:
        parts.append(f"torch {max(torch_mib):,.0f}")
    if r.get("server_gpu_mib_smi") is not None:
        parts.append(f"server {r['server_gpu_mib_smi']:,.0f}")
    return " / ".join(parts) or "-"


def markdown(results: Dict[str, Any]) -> str:
    runs = results["runs"]
    meta = results["meta"]
    by = {_key(r): r for r in runs}
    lines = [
        "| MPS | model | data | N | batch | img/s, all jobs | / synthetic | img/s per job | "
        "step ms (max) | delta | data wait (max) | loading CPU (cores) | jobs' CPU (cores) | "
        "GPU MiB per job (max) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    order = {s: i for i, s in enumerate(SOURCES)}
    for r in sorted(runs, key=lambda r: (r["model"], r["mps"], order.get(r["source"], 9),
                                         r["jobs"])):
        batch = ",".join(str(b) for b in dict.fromkeys(r["batch_sizes"]))
        w = r.get("dl_workers")
        data = r["source"] + (f" ({w} worker{'s' if w != 1 else ''}/job)" if w else "")
        if r.get("error"):
            lines.append(f"| {r['mps']} | {r['model']} | {data} | {r['jobs']} | {batch} | "
                         f"error: {r['error'][:80]} | | | | | | | | |")
            continue
        per = " / ".join(_fmt(j["img_s"]) for j in r["job"])
        mps = r["mps"] + (" (active)" if r.get("mps_active") else "")
        short = "*" if any(j.get("short_window") for j in r["job"]) else ""
        wait = max(j["wait_frac"] for j in r["job"])
        vs = (_ratio_text(ratios(r, by.get(_key(r, "synthetic"))))
              if r["source"] != "synthetic" else "1")
        lines.append(
            f"| {mps} | {r['model']} | {data} | {r['jobs']} | {batch} | {_ranged(r, 'img_s')} | "
            f"{vs} | {per} | {_ranged(r, 'step_s_max', '.1f', 1e3)}{short} | "
            f"{_fmt(r.get('delta'), '.2f')} | {100 * wait:.0f}% | "
            f"{_ranged(r, 'loading_cores', '.1f')} | {r['jobs_cores']:.1f} | {_gpu_mem(r)} |")
    repeat = meta.get("repeat", 1)
    head = [f"Co-location: {meta.get('gpu') or meta.get('device')}, {meta.get('cores')} cores, "
            f"torch {meta.get('torch')}, input {meta.get('size')}px, "
            f"{'bf16 autocast' if meta.get('amp_bf16') else 'float32'}, dataset "
            f"{meta.get('images')} JPEGs, warm-up {meta.get('warmup_s')} s + "
            f"{meta.get('measure_s')} s measured per row"
            + (f", {repeat} rounds (median round, range in brackets)" if repeat > 1 else "")
            + f"; {meta.get('date')}.",
            f"Command: `{meta.get('command')}`.",
            "MPS: " + "; ".join(f"{k}: {v}" for k, v in results.get("mps", {}).items()) + ".",
            "/ synthetic: images/s over those of the synthetic row of the same round. "
            "delta = sum of the jobs' step times alone (N=1, same MPS/model/data/batch) / "
            "the slowest co-located step time (Tabrizian 2020, eq. 4.1). Loading CPU: the "
            "DataLoader workers of all jobs, or the batchcast-server process (hosted: the "
            "server's threads in job 0). Data wait: the share of a job's step time spent "
            "waiting for its next batch. GPU memory: nvidia-smi per process / torch's peak "
            "reserved memory / the server (nvidia-smi; batchcast rows). "
            "* = a step longer than the timed window (one step timed).", ""]
    return "\n".join(head + lines) + "\n"


def summary(results: Dict[str, Any]) -> List[str]:
    """Lines comparing batchcast with the per-job DataLoaders and the synthetic bound."""
    runs = [r for r in results["runs"] if not r.get("error")]
    by = {_key(r): r for r in runs}
    out = []
    for key, bc in sorted(by.items()):
        if key[2] not in SERVED:
            continue
        mps, model, n = key[0], key[1], key[3]
        dl, syn = by.get(_key(bc, "dataloader")), by.get(_key(bc, "synthetic"))
        text = f"MPS {mps}, {model}, {n} job(s): {bc['source']} {bc['img_s']:,.0f} img/s"
        if dl:
            text += (f" = {bc['img_s'] / dl['img_s']:.1f}x the per-job DataLoaders' "
                     f"{dl['img_s']:,.0f}, with {bc['loading_cores']:.1f} loading cores instead "
                     f"of {dl['loading_cores']:.1f}")
        vs = ratios(bc, syn)
        if vs:
            text += f"; {100 * statistics.median(vs):.0f}% of the data-unbound rate"
            if len(vs) > 1:
                text += f" ({100 * min(vs):.0f}-{100 * max(vs):.0f}% over {len(vs)} rounds)"
        out.append(text)
    return out


def runs_batch(runs: List[Dict[str, Any]], model: str) -> int:
    """The batch size plotted for a model: the one of its first run."""
    return next(r["batch_sizes"][0] for r in runs if r["model"] == model)


def plots(results: Dict[str, Any], out_dir: str) -> Union[str, List[str]]:
    """PNG plots; returns the files written, or a note saying why there are none."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("matplotlib not found: no plots (make them where it is installed: "
                "benchmarks/colocate.py --plot-only colocate.json --out DIR)")
    runs = [r for r in results["runs"] if not r.get("error")]
    models = list(dict.fromkeys(r["model"] for r in runs))
    if not models:
        return "nothing measured: no plots"
    colors = {"synthetic": "tab:gray", "dataloader": "tab:red", "batchcast": "tab:blue",
              "hosted": "tab:green"}
    written = []
    for key, ylabel, fname in (("img_s", "images/s, all jobs", "colocate_throughput.png"),
                               ("delta", "delta (co-location speed-up)", "colocate_delta.png")):
        fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), squeeze=False)
        for ax, model in zip(axes[0], models):
            for source in SOURCES:
                for mps, style in (("off", "-"), ("on", "--")):
                    rows = sorted((r for r in runs
                                   if r["model"] == model and r["source"] == source
                                   and r["mps"] == mps and r.get(key) is not None
                                   and len(set(r["batch_sizes"])) == 1
                                   and r["batch_sizes"][0] == runs_batch(runs, model)),
                                  key=lambda r: r["jobs"])
                    if not rows:
                        continue
                    xs, ys = [r["jobs"] for r in rows], [r[key] for r in rows]
                    ax.plot(xs, ys, style, marker="o", color=colors.get(source),
                            label=f"{source}, MPS {mps}")
                    spans = [r.get("range", {}).get(key) or [r[key], r[key]] for r in rows]
                    if any(lo != hi for lo, hi in spans):  # the range over the repeats
                        ax.errorbar(xs, ys, yerr=[[y - lo for y, (lo, _) in zip(ys, spans)],
                                                  [hi - y for y, (_, hi) in zip(ys, spans)]],
                                    fmt="none", color=colors.get(source), capsize=3)
            if key == "delta":
                ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({r["jobs"] for r in runs}))
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.set_xlabel("co-located jobs (N)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{model}, batch {runs_batch(runs, model)}")
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:  # none: e.g. no delta without N=1 rows
                ax.legend(fontsize=8)
        fig.suptitle(f"{results['meta'].get('gpu') or results['meta'].get('device')}: "
                     + ("throughput" if key == "img_s" else "delta = sum alone / max co-located"))
        fig.tight_layout()
        path = os.path.join(out_dir, fname)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# ---- the demo (scripts/demo.sh) ------------------------------------------------

DEMO_LABELS = {"dataloader": "A: a torch DataLoader per job",
               "batchcast": "B: one batchcast server"}


def demo_intro(args: Any) -> str:
    return "\n".join([
        f"== 2 training jobs on the CPU (a small CNN, {args.size} px, batch sizes 32 and 48) "
        f"read {args.data} ({args.images} JPEGs)",
        "   A: each job has its own torch DataLoader, 1 worker each (2 loading processes)",
        "   B: both read one batchcast server with 2 worker threads (each image decoded once, "
        "for both)",
        f"   each measured for {args.measure:g} s after {args.warmup:g} s of warm-up; neither "
        "caches decoded images (both decode every image every epoch, from the page cache)"])


def demo_row(run: Dict[str, Any]) -> str:
    label = DEMO_LABELS.get(run["source"], run["source"])
    if run.get("error"):
        return f"   {label}: error: {run['error']}"
    return f"   measured {label}"


def demo_report(results: Dict[str, Any], out_dir: str) -> str:
    runs = {r["source"]: r for r in results["runs"]}
    lines = ["", f"   {'':32}{'images/s':>9}{'job 0':>8}{'job 1':>8}{'loading CPU':>14}"
             f"{'all CPU':>12}"]
    for source in ("dataloader", "batchcast"):
        r = runs.get(source)
        if r is None or r.get("error"):
            lines.append(f"   {DEMO_LABELS[source]:32} error: {r and r['error']}")
            continue
        per = [j["img_s"] for j in r["job"]]
        lines.append(f"   {DEMO_LABELS[source]:32}{r['img_s']:>9,.0f}{per[0]:>8,.0f}"
                     f"{per[1]:>8,.0f}{r['loading_cores']:>8.2f} cores"
                     f"{r['loading_cores'] + r['jobs_cores']:>6.2f} cores")
    dl, bc = runs.get("dataloader"), runs.get("batchcast")
    if dl and bc and not dl.get("error") and not bc.get("error"):
        per_image = ((dl["loading_cores"] / dl["img_s"])
                     / max(1e-12, bc["loading_cores"] / bc["img_s"]))
        lines += ["", f"== speed-up: {bc['img_s'] / dl['img_s']:.1f}x the images/s, with "
                  f"{per_image:.1f}x less loading CPU per image",
                  f"   (the server decoded {bc.get('server_samples_s', 0):,.0f} images/s, each "
                  f"for both jobs, and waited for the jobs "
                  f"{100 * bc.get('server_blocked_frac', 0):.0f}% "
                  "of the time: in B the training, not the loading, sets the pace)"]
        lines += ["", "== server stats while running (batchcast-server stat NAME, during B's "
                  "warm-up):"] + ["   " + t for t in bc.get("server_stat_text", "").splitlines()]
    lines += ["", f"   logs: {os.path.join(out_dir, 'colocate-server.log')} (server), "
              f"{os.path.join(out_dir, 'colocate-jobs.log')} (jobs); numbers: "
              f"{os.path.join(out_dir, 'colocate.json')}"]
    return "\n".join(lines)


# ---- files --------------------------------------------------------------------


def write_outputs(results: Dict[str, Any], out_dir: str) -> None:
    """The table (colocate.md), the plots and the summary lines."""
    compute_deltas(results["runs"])
    md = os.path.join(out_dir, "colocate.md")
    with open(md, "w") as f:
        f.write(markdown(results))
    made = plots(results, out_dir)
    print(f"table: {md}", flush=True)
    if isinstance(made, str):
        print(made, flush=True)
    else:
        print("plots: " + ", ".join(made), flush=True)
    for line in summary(results):
        print(line, flush=True)


def merge(paths: Sequence[str]) -> Dict[str, Any]:
    """Runs of several JSON files (later files replace the same rows)."""
    merged: Optional[Dict[str, Any]] = None
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        if merged is None:
            merged = data
            continue
        merged["mps"].update(data.get("mps", {}))
        rows = {_key(r): r for r in merged["runs"]}
        rows.update({_key(r): r for r in data["runs"]})
        merged["runs"] = list(rows.values())
    assert merged is not None
    return merged
