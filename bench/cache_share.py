#!/usr/bin/env python3
"""Two builds that share one compiler cache through a server on loopback, the sync kept outside the build.

    python bench/cache_share.py sentencepiece --profile rvv256 --mode accelerated --record NAME

What a team without a shared disk does (docs/compiler-cache.md, "Sharing beyond one machine"), on one host:
a server on 127.0.0.1 stands for the team's store, and two jobs stand for two machines. Each job has a
compiler cache directory and an rvport cache of its own, both new, and builds with --no-cache:

    job-a   pull (the store is empty), `rvport build RECIPE --compiler-cache DIR_A`, push DIR_A
    job-b   pull into a new DIR_B, `rvport build RECIPE --compiler-cache DIR_B`, push DIR_B

The build step itself still runs with `--network none`: the store is reached only by this script, before
and after `rvport build`. A push sends each toolchain entry's live generation as one tar, and its `current`
after it, so a reader never finds a `current` naming a generation the store does not have. A pull takes
only names of rvport's own form and unpacks with tarfile's `data` filter (no links out, no devices, no
owners from the archive). What rvport does with DIR_B is what it does with any imported directory: it
checks it, and a foreign or damaged one is ignored.

The record (records/compiler-cache/NAME.json) holds each job's figures (wall time, build step, ccache's
hits, misses and uncacheable calls, import and export), what each pull and push moved, and whether the two
jobs' artifacts are byte-identical.
"""

from __future__ import annotations

import argparse
import http.server
import io
import os
import re
import shutil
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import common  # noqa: E402
import compiler_cache  # noqa: E402

JOBS = ("job-a", "job-b")
MARKER = "rvport-compiler-cache.json"
ENTRIES = "entries"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}(/[A-Za-z0-9][A-Za-z0-9._-]{0,99}){0,2}")
_ENTRY = re.compile(r"rvport-ccache-[a-z]{1,16}-[0-9a-f]{16}")
_GENERATION = re.compile(r"g[0-9]{1,20}-[0-9]{1,10}")
MAX_OBJECT = 8 << 30  # one generation's tar: the cache's size limit is 2G by default, 1T at most
MAX_SMALL = 64 << 10  # a marker, a current, the entries list


# ------------------------------------------------------------------------------------------------ the store
class _Handler(http.server.BaseHTTPRequestHandler):
    """GET and PUT of files below the server's root, by names of _NAME's form only. A PUT is written beside
    its name and renamed over it, so a GET sees a whole object or the previous one."""

    root: Path

    def log_message(self, fmt: str, *args: object) -> None:  # quiet: the record says what moved
        pass

    def _path(self) -> Path | None:
        name = self.path.lstrip("/")
        if not _NAME.fullmatch(name) or ".." in name:
            self.send_error(400, "bad name")
            return None
        return self.root / name

    def do_GET(self) -> None:
        path = self._path()
        if path is None:
            return
        if not path.is_file():
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(path.stat().st_size))
        self.end_headers()
        with open(path, "rb") as f:
            shutil.copyfileobj(f, self.wfile)

    def do_PUT(self) -> None:
        path = self._path()
        if path is None:
            return
        try:
            size = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.send_error(411)
            return
        if not 0 <= size <= MAX_OBJECT:
            self.send_error(413)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".put-{path.name}-{threading.get_ident()}")
        with open(tmp, "wb") as f:
            left = size
            while left:
                chunk = self.rfile.read(min(left, 1 << 20))
                if not chunk:
                    break
                f.write(chunk)
                left -= len(chunk)
        if left:
            tmp.unlink()
            self.send_error(400, "short body")
            return
        tmp.replace(path)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()


class Store:
    """A file server on 127.0.0.1 (a free port), serving `root`, in a thread of this process."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        handler = type("Handler", (_Handler,), {"root": root})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> Store:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _get(url: str, name: str, limit: int) -> bytes | None:
    """The object `name`, or None when the store has none; at most `limit` bytes."""
    try:
        with urllib.request.urlopen(f"{url}/{name}", timeout=60) as r:
            data = r.read(limit + 1)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise
    if len(data) > limit:
        raise ValueError(f"{name}: over {limit} bytes")
    return data


def _put(url: str, name: str, data: bytes | Path) -> int:
    size = data.stat().st_size if isinstance(data, Path) else len(data)
    body = open(data, "rb") if isinstance(data, Path) else io.BytesIO(data)  # noqa: SIM115
    with body:
        req = urllib.request.Request(f"{url}/{name}", data=body, method="PUT")
        req.add_header("Content-Length", str(size))
        with urllib.request.urlopen(req, timeout=600) as r:
            r.read()
    return size


# ------------------------------------------------------------------------------------------- push and pull
def push(directory: Path, url: str) -> dict:
    """DIR's live generations to the store: the marker, each entry's generation as a tar, then its
    `current`, then the list of entries. Returns what was sent."""
    sent = {"entries": [], "bytes": 0}
    if not (directory / MARKER).is_file():
        return sent
    sent["bytes"] += _put(url, MARKER, (directory / MARKER).read_bytes())
    entries = []
    for entry_dir in sorted(p for p in directory.iterdir() if _ENTRY.fullmatch(p.name)):
        current = entry_dir / "current"
        if current.is_symlink() or not current.is_file():
            continue
        gen = current.read_text()[:64].strip()
        if not _GENERATION.fullmatch(gen) or not (entry_dir / gen).is_dir():
            continue
        with tempfile.NamedTemporaryFile(suffix=".tar") as tmp:
            with tarfile.open(tmp.name, "w") as tar:
                tar.add(entry_dir / gen, arcname=".")
            sent["bytes"] += _put(url, f"{entry_dir.name}/{gen}.tar", Path(tmp.name))
        sent["bytes"] += _put(url, f"{entry_dir.name}/current", (gen + "\n").encode())
        entries.append(entry_dir.name)
        sent["entries"].append({"entry": entry_dir.name, "generation": gen})
    if entries:
        sent["bytes"] += _put(url, ENTRIES, ("\n".join(entries) + "\n").encode())
    return sent


def pull(url: str, directory: Path) -> dict:
    """The store's entries into DIR, which must not exist yet: the marker, and per entry the generation its
    `current` names, unpacked with the `data` filter. A store with nothing yet leaves DIR unmade (rvport
    makes it). Returns what was taken."""
    if directory.exists():
        raise FileExistsError(f"{directory}: a pull makes a new directory")
    if not hasattr(tarfile, "data_filter"):  # Python 3.11.4, 3.12 and later
        raise RuntimeError("this Python's tarfile has no extraction filters: use Python 3.11.4 or later")
    got = {"entries": [], "bytes": 0}
    listing = _get(url, ENTRIES, MAX_SMALL)
    marker = _get(url, MARKER, MAX_SMALL)
    if listing is None or marker is None:
        return got
    directory.mkdir(parents=True, mode=0o755)
    (directory / MARKER).write_bytes(marker)
    for entry in listing.decode("ascii", errors="replace").split():
        if not _ENTRY.fullmatch(entry):
            continue
        current = _get(url, f"{entry}/current", MAX_SMALL)
        gen = (current or b"").decode("ascii", errors="replace").strip()
        if not _GENERATION.fullmatch(gen):
            continue
        dest = directory / entry / gen
        dest.mkdir(parents=True)
        with tempfile.NamedTemporaryFile(suffix=".tar") as tmp:
            size = 0
            with urllib.request.urlopen(f"{url}/{entry}/{gen}.tar", timeout=600) as r:
                while chunk := r.read(1 << 20):  # bounded whatever the server says of its length
                    size += len(chunk)
                    if size > MAX_OBJECT:
                        raise ValueError(f"{entry}/{gen}.tar: over {MAX_OBJECT} bytes")
                    tmp.write(chunk)
            tmp.flush()
            with tarfile.open(tmp.name, "r") as tar:
                tar.extractall(dest, filter="data")
            got["bytes"] += size
        (directory / entry / "current").write_text(gen + "\n")
        got["entries"].append({"entry": entry, "generation": gen})
    return got


# -------------------------------------------------------------------------------------------------- main
def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe", nargs="?", default="sentencepiece")
    ap.add_argument("--profile", default="rvv256")
    ap.add_argument("--mode", default="accelerated")
    ap.add_argument("--work", type=Path, help="keep logs and outputs here (default: a temporary directory)")
    ap.add_argument("--record", metavar="NAME", help="write the record records/compiler-cache/NAME.json")
    ap.add_argument("--no-smoke", dest="smoke", action="store_false", help="pass --no-smoke to both builds")
    return ap.parse_args(list(argv))


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    common.stop_on_signals()
    from rvport.sources.cache import default_cache_dir
    from rvport.verify.compare import compare_dirs

    warm = default_cache_dir(dict(os.environ))
    made = common.work_and_mirror(args.work, prefix="rvport-bench-share-", recipes=[args.recipe])
    if made is None:
        return 2
    work, mirror = made
    shutil.rmtree(work / "store", ignore_errors=True)
    jobs: dict[str, dict] = {}
    loads: list[dict] = []
    with Store(work / "store") as store:
        print(f"store: {store.url}", flush=True)
        for job in JOBS:
            ccache = work / f"ccache-{job}"
            shutil.rmtree(ccache, ignore_errors=True)
            t0 = time.monotonic()
            pulled = pull(store.url, ccache)
            pull_s = time.monotonic() - t0
            kw = {
                "work": work,
                "ccache": ccache,
                "mirror": mirror,
                "mode": args.mode,
                "profile": args.profile,
            }
            res = compiler_cache.one(args.recipe, job, warm=warm, smoke=args.smoke, **kw)
            t0 = time.monotonic()
            pushed = push(ccache, store.url)
            push_s = time.monotonic() - t0
            res["pull"] = {**pulled, "seconds": round(pull_s, 2)}
            res["push"] = {**pushed, "seconds": round(push_s, 2)}
            print(f"  {job}: pulled {pulled['bytes']} bytes, pushed {pushed['bytes']} bytes", flush=True)
            jobs[job] = res
            loads.append(res["load"])
    a, b = (work / f"out-{args.recipe}-{job}" / "artifacts" for job in JOBS)
    same = compare_dirs(a, b) if a.is_dir() and b.is_dir() else None
    identical = {
        "ok": bool(same and same.ok),
        "identical": [f"{n} {sha}" for n, sha in same.identical] if same else [],
        "differences": len(same.differences) if same else None,
    }
    hits_b = ((jobs["job-b"].get("compiler_cache") or {}).get("hits")) or 0
    ok = all(j["rc"] == 0 for j in jobs.values()) and identical["ok"] and hits_b > 0
    print(f"  job-b hits {hits_b}; artifacts identical: {'yes' if identical['ok'] else 'NO'}", flush=True)
    if args.record:
        figures = {
            "recipe": args.recipe,
            "profile": args.profile,
            "mode": args.mode,
            "smoke": args.smoke,
            "store": "http on 127.0.0.1 (this script's thread)",
            "jobs": jobs,
            "identical": identical,
        }
        path = common.write_record(
            "compiler-cache",
            args.record,
            command=["python", "bench/cache_share.py", *argv],
            figures=figures,
            load=common.merge_loads(loads),
        )
        print(f"  wrote {path}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
