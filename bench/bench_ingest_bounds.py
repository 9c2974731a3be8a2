"""Peak memory and time of the loader on hostile uploads, each in its own process.

    PYTHONPATH=. python bench/bench_ingest_bounds.py            # every case
    PYTHONPATH=. python bench/bench_ingest_bounds.py --only gzip

Builds each input under bench/data/bounds/ (bombs are built cheaply: gzip members and tar
headers are repeated, not compressed again), then runs ``engine.load_session`` on it in a
child process (what the web request runs on an upload) and prints the child's peak RSS
(``VmHWM`` of the child's own image: ``ru_maxrss`` would also count the pages of the parent
it was forked from), its RSS above an idle child that only imported the engine,
the wall time and the outcome (refused with its reason, or a session with N problems). The
bound to hold: at most 1 GiB above idle for any single upload.
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data" / "bounds"
MiB = 1024**2
CHILD = """
import sys
from contextlab import engine
if sys.argv[1] != "-":
    try:
        session = engine.load_session(sys.argv[1])
    except engine.TranscriptError as exc:
        print("refused:", str(exc)[:150])
    else:
        dropped = getattr(session.problems, "dropped", 0)
        codes = sorted({p.code for p in session.problems})
        print(f"session: {len(session.problems) + dropped} problems ({', '.join(codes)[:90]})")
# VmHWM: this process image's own peak (ru_maxrss would count the parent's pages at fork)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print("HWM", hwm)
"""
SESSION = (ROOT / "contextlab" / "demo" / "marot__spotter__short.jsonl").read_bytes()


def gzip_repeated(piece: bytes, times: int) -> bytes:
    """A multi-member gzip: ``piece`` compressed once, its member repeated ``times`` times."""
    return gzip.compress(piece, compresslevel=9) * times


def zeros_gzip(total: int) -> bytes:
    return gzip_repeated(b"\0" * (64 * MiB), total // (64 * MiB))


def lines_gzip(line: bytes, count: int) -> bytes:
    block = 1 << 16
    return gzip.compress(SESSION) + gzip_repeated(line * block, count // block)


def tar_headers_gzip(members: int) -> bytes:
    info = tarfile.TarInfo("s/e.txt")
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    block = 1 << 16
    with io.BytesIO() as buf:
        with tarfile.open(fileobj=buf, mode="w") as tf:
            tf.addfile(tarfile.TarInfo("s/s.jsonl"), None)
        first = buf.getvalue()[:512]
    return gzip.compress(first) + gzip_repeated(header * block, members // block)


def zip_bomb(size: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("s/s.jsonl", SESSION)
        with zf.open("s/tool-results/t.txt", "w", force_zip64=True) as member:
            chunk = b"\0" * (16 * MiB)
            for _ in range(size // len(chunk)):
                member.write(chunk)
    return buf.getvalue()


def zip_members(count: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("s/s.jsonl", SESSION)
        for i in range(count):
            zf.writestr(f"s/tool-results/t{i}.txt", b"")
    return buf.getvalue()


def long_line(size: int, letter: bytes = b"lorem ipsum dolor ") -> bytes:
    body = letter * (size // len(letter))
    return SESSION + b'{"type": "user", "uuid": "x", "message": {"content": "' + body + b'"}}\n'


CASES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "gzip 1 GiB of zeros": ("z1.jsonl.gz", lambda: zeros_gzip(1024 * MiB)),
    "gzip 3 GiB of zeros": ("z3.jsonl.gz", lambda: zeros_gzip(3 * 1024 * MiB)),
    "gzip 10 GiB of zeros": ("z10.jsonl.gz", lambda: zeros_gzip(10 * 1024 * MiB)),
    "gzip 4M lines '1'": ("l4m.jsonl.gz", lambda: lines_gzip(b"1\n", 4 * 1024 * 1024)),
    "gzip 1M tiny records": ("r1m.jsonl.gz", lambda: lines_gzip(b'{"type":"x"}\n', 1 << 20)),
    "tar.gz 2M empty members": ("m2m.tar.gz", lambda: tar_headers_gzip(2 * 1024 * 1024)),
    "zip 1 GiB member (bomb)": ("zb.zip", lambda: zip_bomb(1024 * MiB)),
    "zip 100k members": ("m100k.zip", lambda: zip_members(100_000)),
    "a 50 MB line (words)": ("l50.jsonl", lambda: long_line(50 * MiB)),
    "a 300 MB line (past the cap)": ("l300.jsonl", lambda: long_line(300 * MiB)),
}


def run_child(path: str) -> tuple[int, float, str]:
    """(peak RSS in KiB, seconds, outcome) of the loader on ``path`` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, path],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    assert proc.stdout is not None
    out = proc.stdout.read().decode(errors="replace").strip().splitlines()
    code = proc.wait()
    seconds = time.monotonic() - start
    peak = int(out[-1].split()[1]) if out and out[-1].startswith("HWM ") else 0
    outcome = out[-2] if len(out) >= 2 else (out[0] if out else "")
    if code != 0:
        outcome = f"CRASHED (exit {code}): {' | '.join(out[-3:])}"
    return peak, seconds, outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    args = parser.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    idle, _, _ = run_child("-")
    print(f"idle child (engine imported): {idle / 1024:.0f} MiB\n")
    print(f"{'case':32} {'upload':>10} {'peak RSS':>9} {'above idle':>10} {'time':>7}  outcome")
    worst = 0
    for name, (filename, build) in CASES.items():
        if args.only not in name:
            continue
        path = DATA / filename
        if not path.exists():
            path.write_bytes(build())
        rss, seconds, outcome = run_child(str(path))
        worst = max(worst, rss - idle)
        print(
            f"{name:32} {path.stat().st_size / MiB:8.1f}MB {rss / 1024:7.0f}MB "
            f"{(rss - idle) / 1024:8.0f}MB {seconds:6.1f}s  {outcome}"
        )
    print(f"\nworst: {worst / 1024:.0f} MiB above idle (bound: 1024 MiB)")
    return 0 if worst <= 1024 * 1024 else 1


if __name__ == "__main__":
    sys.exit(main())
