"""Lighthouse on the built book: mobile performance and accessibility, served two ways.

The book in ``_build/html`` (``make book``) is served on 127.0.0.1 twice: as
``python -m http.server`` serves it (nothing compressed) and gzip-compressed, as web hosts
serve text (GitHub Pages, Netlify, nginx's ``gzip on``). Lighthouse's mobile preset (simulated
slow 4G and a 4x slower CPU) runs on each page ``--runs`` times in Debian's Chromium; the
script prints each page's median score and range, and the median of its first contentful paint,
largest contentful paint, total blocking time and bytes transferred. Issue 36 asks for a
performance of at least 80 and an accessibility of 100 on the intro, a long chapter and the
explorer.

Lighthouse is not part of the book's environment: give its command with ``--lighthouse``, e.g.
``npm install lighthouse@12.8.2`` in a folder, then
``--lighthouse /that/folder/node_modules/.bin/lighthouse``. Usage::

    python benchmarks/bench_pages.py --lighthouse PATH [--runs 5] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import io
import json
import os
import statistics
import subprocess
import tempfile
import threading
from pathlib import Path

SITE = Path(__file__).resolve().parents[1] / "_build" / "html"
PAGES = ("intro", "chapters/03_scaled_dot_product_attention", "chapters/attention_explorer")
TEXT = (".html", ".js", ".css", ".json", ".svg", ".txt")


class Gzipped(http.server.SimpleHTTPRequestHandler):
    """Serves text files gzip-compressed to a client that accepts it; the rest as they are."""

    def send_head(self):
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        accepts = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (accepts and path.endswith(TEXT) and os.path.isfile(path)):
            return super().send_head()
        data = gzip.compress(Path(path).read_bytes(), 6)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        return io.BytesIO(data)

    def log_message(self, *args) -> None:
        pass


class Plain(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def serve(handler) -> str:
    """Serve SITE with ``handler`` on a free port, in a thread; its address."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(SITE))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def lighthouse(command: str, chromium: str, url: str) -> dict:
    """One Lighthouse run (mobile preset): the scores and metrics we report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        flags = "--headless=new --no-sandbox --disable-gpu"
        args = [command, url, "--quiet", f"--chrome-flags={flags}", f"--output-path={out}"]
        args += ["--only-categories=performance,accessibility", "--output=json"]
        subprocess.run(args, env={**os.environ, "CHROME_PATH": chromium}, check=True)
        report = json.loads(out.read_text())
    audits = report["audits"]
    return {
        "performance": round(100 * report["categories"]["performance"]["score"]),
        "accessibility": round(100 * report["categories"]["accessibility"]["score"]),
        "FCP s": audits["first-contentful-paint"]["numericValue"] / 1000,
        "LCP s": audits["largest-contentful-paint"]["numericValue"] / 1000,
        "TBT ms": audits["total-blocking-time"]["numericValue"],
        "MB": audits["total-byte-weight"]["numericValue"] / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lighthouse", required=True, help="the lighthouse command")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not (SITE / "intro.html").exists():
        parser.error(f"no built book in {SITE}: run `make book` first")
    servers = {"gzip": serve(Gzipped), "plain": serve(Plain)}
    print(f"Lighthouse mobile, {args.runs} runs a page, served from {SITE}; load {os.getloadavg()}")
    for how, address in servers.items():
        runs = {page: [] for page in PAGES}
        for _ in range(args.runs):  # the pages in turn: a slow phase of the machine hits each
            for page in PAGES:
                runs[page].append(
                    lighthouse(args.lighthouse, args.chromium, f"{address}/{page}.html")
                )
        for page, results in runs.items():
            perf = [r["performance"] for r in results]
            medians = {k: statistics.median(r[k] for r in results) for k in results[0]}
            print(
                f"{how:5s} {page:42s} performance {medians['performance']:.0f} "
                f"[{min(perf)}-{max(perf)}], accessibility {medians['accessibility']:.0f}, "
                f"FCP {medians['FCP s']:.1f} s, LCP {medians['LCP s']:.1f} s, "
                f"TBT {medians['TBT ms']:.0f} ms, {medians['MB']:.2f} MB"
            )


if __name__ == "__main__":
    main()
