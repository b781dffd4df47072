"""PNG plots of a benchmark run (matplotlib, Agg backend): step time and round trips per step by
model and configuration, and the warm-up curve of forwarded descriptor calls."""
from __future__ import annotations

import os


def _pyplot():
    import matplotlib  # noqa: PLC0415 - only when plotting

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def _grouped_bars(rows: list[dict], value, ylabel: str, title: str, path: str,
                  log: bool = False) -> None:
    plt = _pyplot()
    models = list(dict.fromkeys(r["model"] for r in rows))
    configurations = list(dict.fromkeys(r["configuration"] for r in rows))
    values = {(r["model"], r["configuration"]): value(r) for r in rows}
    width = 0.8 / max(len(configurations), 1)
    figure, axes = plt.subplots(figsize=(max(6, 1.6 * len(models) * len(configurations) / 3), 4))
    for i, config in enumerate(configurations):
        xs = [m + (i - (len(configurations) - 1) / 2) * width for m in range(len(models))]
        ys = [values.get((model, config)) for model in models]
        ys = [y if y is not None else 0 for y in ys]
        axes.bar(xs, ys, width, label=config)
    axes.set_xticks(range(len(models)), models)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    if log:
        axes.set_yscale("log")
    axes.legend(fontsize="small", ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def warmup_curve(rows: list[dict], path: str, first_steps: int = 10) -> None:
    """Forwarded descriptor calls per step over the first (warm-up) steps, one line per vgpu
    configuration and model: reuse mode drops to zero after the first step(s). The worker
    records counters per step only while warming up."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 4))
    for r in rows:
        counters = (r.get("per_step_counters") or [])[:first_steps]
        if not counters:
            continue
        ys = [c["descriptor_calls_forwarded"] for c in counters]
        style = "-" if r["configuration"].endswith("reuse") else "--"
        axes.plot(range(1, len(ys) + 1), [max(y, 0.5) for y in ys], style, marker="o",
                  label=f"{r['model']}: {r['configuration']}")
    axes.set_yscale("log")
    axes.xaxis.get_major_locator().set_params(integer=True)
    axes.set_xlabel("warm-up step")
    axes.set_ylabel("descriptor calls forwarded (0 drawn at 0.5)")
    axes.set_title("Warm-up: forwarded descriptor calls per step")
    axes.legend(fontsize="x-small", ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def write_all(rows: list[dict], folder: str) -> list[str]:
    """Writes step_time.png, round_trips.png and warmup_curve.png into `folder`; returns their
    paths."""
    paths = [os.path.join(folder, n) for n in ("step_time.png", "round_trips.png",
                                               "warmup_curve.png")]
    _grouped_bars(rows, lambda r: 1000 * r["summary"]["median_step_s"], "median step time (ms)",
                  "Step time by model and configuration (lower is better)", paths[0])
    vgpu_rows = [r for r in rows if "round_trips_per_step" in r["summary"]]
    _grouped_bars(vgpu_rows, lambda r: max(r["summary"]["round_trips_per_step"], 0.5),
                  "round trips per step (log)", "Round trips per measured step", paths[1],
                  log=True)
    warmup_curve(vgpu_rows, paths[2])
    return paths
