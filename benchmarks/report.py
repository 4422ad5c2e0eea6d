"""The bench report as Markdown: the tables of ``specguard bench`` and of the docs."""

from __future__ import annotations

from typing import Any

__all__ = ["format_report"]

_COLUMNS = (
    ("backend", "backend", "{}"),
    ("batch", "B", "{}"),
    ("floor_us", "floor µs", "{:.1f}"),
    ("full_us", "full µs", "{:.1f}"),
    ("full_vs_floor", "full ÷ floor", "{:.2f}×"),
    ("metadata_us", "metadata µs", "{:.2f}"),
    ("default_us", "default µs", "{:.2f}"),
    ("construct_us", "construct µs", "{:.1f}"),
    ("naive_us", "naive µs", "{:.1f}"),
    ("naive_vs_construct", "naive ÷ construct", "{:.1f}×"),
    ("peak_bytes", "peak extra KiB", "{:.1f}"),
    ("token_bytes", "token arrays KiB", "{:.1f}"),
)


def _cell(key: str, pattern: str, value: Any) -> str:
    if value is None:
        return "n/a"
    if key.endswith("_bytes"):
        value = value / 1024
    return pattern.format(value)


def validation_table(rows: list[dict[str, Any]]) -> str:
    """One line per backend and batch size."""
    lines = ["| " + " | ".join(title for _, title, _ in _COLUMNS) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(_COLUMNS))) + "|"]
    for row in rows:
        cells = (_cell(key, pattern, row[key]) for key, _, pattern in _COLUMNS)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def adapters_table(views: list[dict[str, Any]]) -> str:
    """One line per engine view and depth: the view against its engine-read floor (what
    the engine reads of the same object anyway), with the validation of what it built."""
    lines = ["| view | B | depth | view µs | engine floor µs | view ÷ floor | validation µs |",
             "|---|---|---|---:|---:|---:|---:|"]
    lines += [f"| {e['view']} | {e['batch']} | {e['depth']} | {e['view_us']:.1f} | "
              f"{e['engine_floor_us']:.1f} | {e['ratio_to_engine_floor']:.2f}× | "
              f"{e['validation_us']:.1f} |" for e in views]
    return "\n".join(lines)


def from_mapping_table(entries: list[dict[str, Any]]) -> str:
    """One line per batch size: each builder form against ``np.array`` of the same rows."""
    forms = [f for f in ("lists", "arrays", "dense") if all(f"{f}_us" in e for e in entries)]
    head = " | ".join(f"{f} µs | {f} ÷ np.array" for f in forms)
    lines = [f"| B | np.array µs | {head} |",
             "|---|---:|" + "---:|---:|" * len(forms)]
    for e in entries:
        cells = " | ".join(f"{e[f + '_us']:.1f} | {e[f + '_ratio']:.2f}×" for f in forms)
        lines.append(f"| {e['batch']} | {e['np_array_us']:.1f} | {cells} |")
    return "\n".join(lines)


def _engine_lines(engine: dict[str, Any]) -> list[str]:
    if not engine.get("available"):
        return [f"- engine step: not measured ({engine.get('reason', 'unavailable')})"]
    smoke = " (smoke workload: steps too short to judge the overhead)" if engine.get("smoke") \
        else ""
    passes = engine.get("passes", 1)
    by_pass = ""
    if passes > 1:
        shown = " / ".join(f"{v:+.2%}" for v in engine.get("strict_default_overhead_by_pass", []))
        by_pass = f"; the default depth by pass: {shown}"
    runs = f"{passes} runs of " if passes > 1 else ""
    return [
        f"- engine step ({engine['workload']}; {runs}{engine['steps']} steps, in lockstep): "
        f"contracts off {engine['off_ms']:.2f} ms; strict (metadata depth) "
        f"{engine['strict_ms']:.2f} ms, {engine['strict_overhead']:+.2%}; strict at the default "
        f"depth (essential) {engine['strict_default_ms']:.2f} ms, "
        f"{engine['strict_default_overhead']:+.2%}; strict full depth "
        f"{engine['strict_full_ms']:.2f} ms, {engine['strict_full_overhead']:+.2%} "
        f"(median of the per-step ratios to off, pooled over the runs{by_pass}){smoke}; "
        f"freed tensor memory reused: {engine.get('freed_memory_reused', False)}",
        f"- time inside contract checks, by the engine's own wall-clock tally: "
        f"{engine['strict_contract_share']:.2%} of step time (metadata depth), "
        f"{engine['strict_default_contract_share']:.2%} (default depth), "
        f"{engine['strict_full_contract_share']:.2%} (full depth)",
    ]


def _dp_lines(dp: dict[str, Any] | None) -> list[str]:
    if not dp:
        return []
    if not dp.get("available"):
        return [f"- data-parallel ranks: not measured ({dp.get('reason', 'unavailable')})"]
    return [f"- data-parallel ranks ({dp['ranks']} ranks, {dp['workload']}; {dp['steps']} "
            f"steps): the contracts' collective (gather and check one row per rank) "
            f"{dp['collective_ms']:.3f} ms per step of {dp['step_ms']:.2f} ms, "
            f"{dp['collective_share']:.2%} of step time"]


def rules_table(rules: list[dict[str, Any]]) -> str:
    """Each rule's depth and the µs of its check alone, per batch size (a rule that reads
    further at full depth has a second row); rules with no object in the workload last."""
    sizes = sorted({int(size) for row in rules for size in row["us"]})
    head = "| rule | depth | " + " | ".join(f"B={size} µs" for size in sizes) + " |"
    lines = [head, "|---|---|" + "---:|" * len(sizes)]
    missing = []
    for row in rules:
        if "note" in row:
            missing.append(row["code"])
            continue
        for key, depth in (("us", row["depth"]), ("us_full", "full")):
            if key not in row:
                continue
            cells = " | ".join("—" if row[key].get(size, row[key].get(str(size))) is None
                               else f"{row[key].get(size, row[key].get(str(size))):.1f}"
                               for size in sizes)
            lines.append(f"| {row['code']} | {depth} | {cells} |")
    if missing:
        lines.append("")
        lines.append("Not in this workload (no object they apply to): " + ", ".join(missing))
    return "\n".join(lines)


def format_report(report: dict[str, Any]) -> str:
    """The full report: machine, validation table, mode off, engine, targets."""
    m = report["machine"]
    s = report["settings"]
    off = report["mode_off"]
    lines = [
        f"Machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}, numpy {m['numpy']}, "
        f"torch {m['torch']} (1 thread), pydantic {m['pydantic']}, "
        f"jaxtyping {m.get('jaxtyping', '?')}, beartype {m.get('beartype', '?')}",
        f"Decode batches, mtp_k={s['mtp_k']}, vocab {s['vocab_size']}; median of "
        f"{s['repeats']} interleaved repeats of about {s['target_ms']:g} ms each "
        f"({s['clock']}).",
        "",
        validation_table(report["validation"]),
        "",
        f"- mode off: decorated method is the original function: {off['identity']}; "
        f"call {off['off_us']:.3f} µs vs undecorated {off['plain_us']:.3f} µs "
        f"(guarded, strict, metadata depth: {off['strict_metadata_us']:.2f} µs; "
        f"default depth: {off['strict_default_us']:.2f} µs; guarded by hand: "
        f"{off['by_hand_us']:.2f} µs)",
        *_engine_lines(report["engine"]),
        *_dp_lines(report.get("dp")),
        "",
        "Engine views (the view's call against what the engine reads of the same object):",
        "",
        adapters_table(report["adapters"]),
        "",
        "DraftTokens builders against np.array of the same rows:",
        "",
        from_mapping_table(report["from_mapping"]),
        "",
        "Each rule's check on its own, on clean decode steps of B seqs:",
        "",
        rules_table(report.get("rules", [])),
        "",
        f"- memory: validating {report['memory']['num_seqs']} seqs whose token stream is "
        f"{report['memory']['token_bytes'] / 1024:.0f} KiB allocates "
        f"{report['memory']['peak_bytes'] / 1024:.1f} KiB at most (no token array is copied)",
        f"- import specguard.contracts: {report['import']['import_ms']:.1f} ms CPU of the "
        f"importing thread; numpy alone "
        f"{report['import']['numpy_ms']:.1f} ms, specguard's modules beyond numpy "
        f"{report['import']['beyond_numpy_ms']:.1f} ms; also loads: "
        f"{', '.join(report['import']['loads']) or 'nothing optional'}",
        "",
        "Targets:",
    ]
    for target in report["targets"]:
        mark = "met" if target["met"] else "MISSED"
        value = target["value"]
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        note = f"; {target['note']}" if target.get("note") else ""
        lines.append(f"- [{mark}] {target['target']} ({shown}{note})")
    return "\n".join(lines)
