# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render SGLang `bench_serving` results (JSONL) as a Markdown table and a PNG plot.

Used by playbooks/benchmark.yml on the controller; standard library only (the PNG is drawn by a
small built-in rasteriser, so the controller needs no matplotlib).

    python3 bench_report.py RESULTS_DIR --markdown report.md --png report.png [--runs baseline eagle3]

RESULTS_DIR holds `<run>/<host>/<prompt set>-c<concurrency>.jsonl` files written by
`python -m sglang.bench_serving --output-file ... --tag <run>|<prompt set>`; every run found is
compared (or only --runs, in that order). bench_serving appends one JSON line per run to a
file; the last line (the latest run) counts.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import struct
import sys
import zlib

METRICS = (
    # key, heading, format
    ("output_throughput", "output tok/s", "{:.1f}"),
    ("decode_tok_s", "decode tok/s per request", "{:.1f}"),
    ("mean_ttft_ms", "TTFT mean ms", "{:.0f}"),
    ("p99_ttft_ms", "TTFT p99 ms", "{:.0f}"),
    ("mean_itl_ms", "ITL mean ms", "{:.1f}"),
    ("p99_itl_ms", "ITL p99 ms", "{:.1f}"),
    ("mean_e2e_latency_ms", "E2E mean ms", "{:.0f}"),
)


class ReportError(Exception):
    pass


def load(results: pathlib.Path, runs: list[str] | None = None) -> list[dict]:
    """All results under RESULTS as flat rows: run, host, prompt_set, concurrency + metrics."""
    rows = []
    files = sorted(results.glob("*/*/*.jsonl"))
    if not files:
        raise ReportError(f"no bench_serving results (<run>/<host>/*.jsonl) under {results}")
    for path in files:
        run, host = path.parent.parent.name, path.parent.name
        if runs and run not in runs:
            continue
        lines = [(n, line) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
        # bench_serving appends to its --output-file: the last line is the latest run.
        for n, line in lines[-1:]:
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise ReportError(f"{path}:{n}: not JSON ({exc})") from None
            tag = str(data.get("tag") or "")
            parts = tag.split("|")  # benchmark.yml tags a result "<run>|<prompt set>|<num prompts>"
            prompt_set = parts[1] if len(parts) > 1 else path.stem.rsplit("-c", 1)[0]
            num_prompts = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
            conc = data.get("max_concurrency")
            if conc is None:
                raise ReportError(f"{path}:{n}: no max_concurrency (run bench_serving with --max-concurrency)")
            tpot = data.get("median_itl_ms") or data.get("mean_tpot_ms")
            row = {"run": run, "host": host, "prompt_set": prompt_set, "concurrency": int(conc),
                   "completed": data.get("completed"), "num_prompts": num_prompts,
                   "decode_tok_s": (1000.0 / tpot) if tpot else None}
            for key, _heading, _fmt_ in METRICS:
                row.setdefault(key, data.get(key))
            rows.append(row)
    if runs:
        missing = [r for r in runs if r not in {row["run"] for row in rows}]
        if missing:
            raise ReportError(f"runs {missing} not found under {results} (have: "
                              f"{sorted({p.parent.parent.name for p in files})})")
        order = {r: i for i, r in enumerate(runs)}
    else:
        order = {}
    rows.sort(key=lambda r: (order.get(r["run"], 0), r["run"], r["prompt_set"], r["host"], r["concurrency"]))
    return rows


def _fmt(fmt: str, value) -> str:
    return "n/a" if value is None else fmt.format(value)


def markdown(rows: list[dict], png_name: str | None = None) -> str:
    out = ["# SGLang benchmark (`python -m sglang.bench_serving`)", ""]
    runs = list(dict.fromkeys(r["run"] for r in rows))
    # The headline: single-stream decode speed per run (the seed's "EAGLE-3 96.1 vs 54.1 tok/s").
    single = [r for r in rows if r["concurrency"] == 1 and r["decode_tok_s"]]
    if single and len(runs) > 1:
        out += ["## Single-stream decode speed (concurrency 1)", "",
                "| prompt set | " + " | ".join(runs) + " |",
                "| --- | " + " | ".join("---:" for _run in runs) + " |"]
        for ps in dict.fromkeys(r["prompt_set"] for r in single):
            cells = []
            for run in runs:
                vals = [r["decode_tok_s"] for r in single if r["run"] == run and r["prompt_set"] == ps]
                cells.append(f"{sum(vals) / len(vals):.1f} tok/s" if vals else "n/a")
            out.append(f"| {ps} | " + " | ".join(cells) + " |")
        out.append("")
    out += ["## Results per concurrency", "",
            "| run | host | prompt set | concurrency | completed requests | " + " | ".join(h for _key, h, _fmt_ in METRICS) + " |",
            "| --- | --- | --- | ---: | ---: | " + " | ".join("---:" for _metric in METRICS) + " |"]
    for r in rows:
        done = f"{r['completed']}/{r['num_prompts']}" if r.get("num_prompts") else str(r["completed"])
        out.append(f"| {r['run']} | {r['host']} | {r['prompt_set']} | {r['concurrency']} | {done} | "
                   + " | ".join(_fmt(f, r[k]) for k, _heading, f in METRICS) + " |")
    out += ["", "decode tok/s per request = 1000 / median inter-token latency; output tok/s is the whole server's.",
            "TTFT = time to first token, ITL = inter-token latency, E2E = end-to-end request latency.", ""]
    if png_name:
        out += [f"![output tok/s, TTFT and ITL per concurrency]({png_name})", ""]
    return "\n".join(out)


# --- a tiny PNG line-chart rasteriser (stdlib only) ---------------------------------------------
_FONT = {  # 3x5 glyphs, rows top to bottom, bits left to right
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001010010010",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", "/": "001001010100100",
    "-": "000000111000000", " ": "000000000000000", "|": "010010010010010", "_": "000000000000111",
    "(": "010100100100010", ")": "010001001001010", ":": "000010000010000", "=": "000111000111000",
}
for _ch, _bits in {
    "A": "010101111101101", "B": "110101110101110", "C": "011100100100011", "D": "110101101101110",
    "E": "111100110100111", "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101", "L": "100100100100111",
    "M": "101111111101101", "N": "110101101101101", "O": "010101101101010", "P": "110101110100100",
    "Q": "010101101110011", "R": "110101110101101", "S": "011100010001110", "T": "111010010010010",
    "U": "101101101101111", "V": "101101101101010", "W": "101101111111101", "X": "101101010101101",
    "Y": "101101010010010", "Z": "111001010100111",
}.items():
    _FONT[_ch] = _bits

PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]


class Canvas:
    def __init__(self, width: int, height: int):
        self.w, self.h = width, height
        self.px = bytearray(b"\xff" * (width * height * 3))

    def set(self, x: int, y: int, rgb) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i:i + 3] = bytes(rgb)

    def rect(self, x0, y0, x1, y1, rgb) -> None:
        for y in range(max(0, y0), min(self.h, y1 + 1)):
            for x in range(max(0, x0), min(self.w, x1 + 1)):
                self.set(x, y, rgb)

    def line(self, x0, y0, x1, y1, rgb, width: int = 1) -> None:
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for s in range(steps + 1):
            x = round(x0 + (x1 - x0) * s / steps)
            y = round(y0 + (y1 - y0) * s / steps)
            self.rect(x - width // 2, y - width // 2, x + (width - 1) // 2, y + (width - 1) // 2, rgb)

    def text(self, x: int, y: int, s: str, rgb=(0, 0, 0), scale: int = 2) -> None:
        for ch in s.upper():
            bits = _FONT.get(ch, _FONT[" "])
            for i, b in enumerate(bits):
                if b == "1":
                    self.rect(x + (i % 3) * scale, y + (i // 3) * scale,
                              x + (i % 3) * scale + scale - 1, y + (i // 3) * scale + scale - 1, rgb)
            x += 4 * scale

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return (struct.pack(">I", len(data)) + kind + data
                    + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def _nice(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 1 else f"{v:.2f}"


def plot(rows: list[dict]) -> bytes:
    """Three panels (output tok/s, mean TTFT, mean ITL) over concurrency, one line per run/prompt set."""
    panels = [("output_throughput", "OUTPUT TOK/S"), ("mean_ttft_ms", "TTFT MS"), ("mean_itl_ms", "ITL MS")]
    series = list(dict.fromkeys((r["run"], r["prompt_set"]) for r in rows))
    pw, ph, left, top = 380, 300, 60, 40
    legend_h = 20 * len(series) + 20
    canvas = Canvas(len(panels) * (pw + left) + 60, top + ph + 50 + legend_h)
    concs = sorted({r["concurrency"] for r in rows})
    for p, (key, title) in enumerate(panels):
        x0 = 20 + p * (pw + left) + left
        y0, y1 = top, top + ph
        vals = [r[key] for r in rows if r[key] is not None]
        vmax = max(vals) * 1.1 if vals and max(vals) > 0 else 1.0
        canvas.text(x0, 10, title, scale=3)
        canvas.line(x0, y1, x0 + pw, y1, (0, 0, 0))
        canvas.line(x0, y0, x0, y1, (0, 0, 0))
        for g in range(1, 5):
            gy = y1 - round(ph * g / 4)
            canvas.line(x0 + 1, gy, x0 + pw, gy, (225, 225, 225))
            canvas.text(x0 - 55, gy - 4, _nice(vmax * g / 4))

        def xpos(c, x0=x0):
            return x0 + (round(pw * concs.index(c) / (len(concs) - 1)) if len(concs) > 1 else pw // 2)

        for c in concs:
            canvas.line(xpos(c), y1, xpos(c), y1 + 4, (0, 0, 0))
            canvas.text(xpos(c) - 6, y1 + 8, str(c))
        canvas.text(x0 + pw // 2 - 50, y1 + 24, "CONCURRENCY")
        for s, (run, ps) in enumerate(series):
            colour = PALETTE[s % len(PALETTE)]
            pts = {}
            for r in rows:
                if (r["run"], r["prompt_set"]) == (run, ps) and r[key] is not None:
                    pts.setdefault(r["concurrency"], []).append(r[key])
            coords = [(xpos(c), y1 - round(ph * (sum(v) / len(v)) / vmax)) for c, v in sorted(pts.items())]
            for a, b in zip(coords, coords[1:]):
                canvas.line(a[0], a[1], b[0], b[1], colour, width=3)
            for x, y in coords:
                canvas.rect(x - 3, y - 3, x + 3, y + 3, colour)
    ly = top + ph + 50
    for s, (run, ps) in enumerate(series):
        colour = PALETTE[s % len(PALETTE)]
        canvas.rect(20 + left, ly + 20 * s, 20 + left + 14, ly + 20 * s + 10, colour)
        canvas.text(20 + left + 24, ly + 20 * s, f"{run} / {ps}")
    return canvas.png()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=pathlib.Path)
    ap.add_argument("--markdown", type=pathlib.Path, required=True)
    ap.add_argument("--png", type=pathlib.Path)
    ap.add_argument("--runs", nargs="*")
    args = ap.parse_args(argv)
    try:
        rows = load(args.results, args.runs)
    except ReportError as exc:
        print(f"bench_report: {exc}", file=sys.stderr)
        return 2
    text = markdown(rows, args.png.name if args.png else None)
    changed = []
    outputs = [(args.markdown, text.encode())]
    if args.png:
        outputs.append((args.png, plot(rows)))
    for path, data in outputs:
        if not path.exists() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
            changed.append(str(path))
    print(json.dumps({"changed": bool(changed), "written": changed, "rows": len(rows),
                      "runs": list(dict.fromkeys(r["run"] for r in rows))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
