#!/usr/bin/env python3
"""The README's main command from nothing, the old way and the new way, side by side in one run.

    sudo .venv/bin/python bench/first_run.py            # both ways, about 30-50 minutes on 2 cores sudo
    .venv/bin/python bench/first_run.py --keep     # keep both engines' data roots and caches too sudo
    .venv/bin/python bench/first_run.py --new-first   # the new way first (alternate the order between runs)
    sudo .venv/bin/python bench/first_run.py --old-rev cedd32c   # the old way is rvport as of commit cedd32c

The command is the README's quick start after setup-host and the venv (the same for both ways, not timed):

    rvport build msgspec sentencepiece tiktoken --profile rvv256 --tag local --output OUT
    rvport verify artifacts OUT/artifacts --profile rvv256          (with --json, to read the verdicts)

run twice, each from nothing: first the old way (RVPORT_BOOTSTRAP=debootstrap: the riscv64 base made by
debootstrap in one run, as when issue #17 was filed), then the new way (rvport's default: the split method,
docs/bootstrap.md). Everything else is the same code.

With --old-rev REV the old way is instead the rvport of git revision REV of this repository (cedd32c: the code
issue #17 was filed against), labelled `old (rev cedd32c)`: before either run (not timed), `git archive REV`
is unpacked in the old run's directory, a fresh venv made there (`python -m venv`, this script's interpreter)
and the tree installed into it (`pip install DIR`, not editable, pip's defaults); the old run then runs that
venv's `rvport` console script, in the unpacked tree (where that revision finds its recipes/, dockerfiles/ and
toolchains/), without this checkout on PYTHONPATH and without RVPORT_BOOTSTRAP, with the two commands that
revision's README gives (its output directory made the run's own, --json added to verify), e.g. for cedd32c:

    rvport build msgspec sentencepiece tiktoken --profile rvv256 --tag local --output OUT
    rvport verify artifacts OUT/artifacts/msgspec OUT/artifacts/sentencepiece --profile rvv256

Its result.json may not record every time the step table reads (cedd32c's base images carry no duration_s,
its stages no "accelerated" timing): those steps show n/a, the bases then as one row, all together (the old
run's stages' "base" timings, the new run's bases summed); the totals always compare. Its wheels may differ
from the new ones (other recipe versions): their sha256 are compared and reported, not a failure. The share
saved with the other steps held equal is not computed (the code differs in more than the base).

"From nothing", without touching the user's Docker engine: each run gets
  - its own dockerd (started here, stopped afterwards): --data-root, --exec-root, --pidfile and its socket in
    the run's directory; its own containerd (dockerd starts one under its exec-root); a config file of its
    own (so /etc/docker/daemon.json, whose data-root would clash, is not read) holding only the host
    daemon.json's storage driver, storage options, MTU and DNS settings, so the engine builds as the host's
    would; its own bridge (a Linux bridge made here, --bridge) with --iptables=false, so it never rewrites
    the host engine's chains: the NAT and forward rules for its subnet are added here and deleted afterwards.
    Toolchain images need the network (apt); base images are loaded, build stages, smoke tests and the
    engine's own queries run with --network none;
  - DOCKER_HOST pointing at that daemon and BUILDX_BUILDER=default for both rvport commands: the Docker SDK,
    the docker CLI and buildx's default builder (the docker driver of DOCKER_HOST's engine) all follow it;
    DOCKER_CONTEXT and TLS variables are dropped. After the run, every image result.json names is looked up
    in the private engine, which proves where the build went;
  - its own rvport cache (RVPORT_CACHE_DIR: downloads, prepared trees, artifacts, base records) and output
    directory, and its own CARGO_HOME (tiktoken's crates are vendored on the host by cargo; the host's cargo
    config files are copied in, its registry cache is not). rvport downloads sdists and its pinned tools
    itself, into its cache; it asks pip for its configuration only, so pip's own cache plays no part.
    debootstrap downloads every .deb again into each rootfs.

Printed per run: the wall time of each command, the load average meanwhile, and the time split by step from
result.json (each base image's `duration_s`, the stages' timings: sources, toolchain images, accelerated
prefix images, each wheel build, verify, smoke tests) and the verify command; then the ratio old/new and the
share saved, per step and in total, and the share saved with the steps the way does not change held equal
(so that load on the machine slowing, say, one run's compiles counts for neither way); whether both runs
verified every wheel, and whether the two runs' wheels have the same sha256 (they are reproducible builds, so
they should).

Run as root (dockerd, the bridge, the rules; debootstrap). Other work on the machine moves the figures: the
load average is printed beside them. Benchmarks are ratios in one run, never timed assertions. Exit 0 when
both runs built and verified every wheel, 1 otherwise. Logs, result.json and the wheels stay in the work
directory (printed); the engines' data roots and the caches (and --old-rev's tree and venv) are removed unless
--keep.
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import common  # noqa: E402  (bench/ is first on sys.path)

from rvport.engine import bootstrap  # noqa: E402

RECIPES = ("msgspec", "sentencepiece", "tiktoken")
PROFILE = "rvv256"
WAYS = (("old", "debootstrap"), ("new", None))  # (name, RVPORT_BOOTSTRAP)
# the README's main command, the words after `rvport` (its output directory `out` is made each run's own)
BUILD = ("build", *RECIPES, "--profile", PROFILE, "--tag", "local", "--output", "out")
VERIFY = ("verify", "artifacts", "out/artifacts", "--profile", PROFILE)
WAITED = "stages waiting for their images"  # images made side by side: the run's time they cost
BASES_TOGETHER = "base images, all together"  # a result.json without a time per base: its stages' "base"
# what the private daemon takes from the host's daemon.json: how it stores and networks, never where
HOST_SETTINGS = ("storage-driver", "storage-opts", "mtu", "dns", "dns-opts", "dns-search")
DROPPED_ENV = ("DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_TLS", "BUILDX_BUILDER")


# ------------------------------------------------------------------------------------------ the engine
def daemon_settings(host_config: Path, storage_driver: str | None) -> dict:
    """The private daemon's config file: HOST_SETTINGS from the host's daemon.json, --storage-driver over
    it."""
    try:
        host = json.loads(host_config.read_text())
    except (OSError, ValueError):
        host = {}
    out = {k: host[k] for k in HOST_SETTINGS if k in host}
    if storage_driver:
        out["storage-driver"] = storage_driver
        out.pop("storage-opts", None)
    return out


def dockerd_argv(root: Path, bridge: str) -> list[str]:
    return [
        "dockerd",
        "--config-file",
        str(root / "daemon.json"),
        "--data-root",
        str(root / "data"),
        "--exec-root",
        str(root / "exec"),
        "--pidfile",
        str(root / "dockerd.pid"),
        "-H",
        f"unix://{root / 'docker.sock'}",
        "--bridge",
        bridge,
        "--iptables=false",
        "--ip6tables=false",
    ]


def nat_rules(bridge: str, subnet: str) -> list[list[str]]:
    """iptables rules (table and rule, without -A/-I/-D) that let the bridge's containers out, and back in."""
    return [
        ["-t", "filter", "FORWARD", "-i", bridge, "-j", "ACCEPT"],
        [
            "-t",
            "filter",
            "FORWARD",
            "-o",
            bridge,
            "-m",
            "conntrack",
            "--ctstate",
            "RELATED,ESTABLISHED",
            "-j",
            "ACCEPT",
        ],
        ["-t", "nat", "POSTROUTING", "-s", subnet, "!", "-o", bridge, "-j", "MASQUERADE"],
    ]


def free_subnet(wanted: str, routes: list[str]) -> ipaddress.IPv4Network:
    """`wanted` if no route of the host overlaps it; else a clear error."""
    net = ipaddress.ip_network(wanted)
    for r in routes:
        try:
            other = ipaddress.ip_network(r, strict=False)
        except ValueError:
            continue
        if other.version == net.version and other.prefixlen > 0 and net.overlaps(other):
            raise SystemExit(f"--subnet {wanted} overlaps the host's route {r}: pick another one")
    return net


def _routes() -> list[str]:
    cp = subprocess.run(["ip", "-j", "route"], capture_output=True, text=True, check=True)
    return [r["dst"] for r in json.loads(cp.stdout or "[]") if r.get("dst") not in (None, "default")]


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


class PrivateEngine:
    """A dockerd of its own under `root`, on a bridge of its own; stopped (and its data root removed unless
    `keep`) on exit, its bridge and rules deleted."""

    def __init__(self, root: Path, *, bridge: str, subnet: ipaddress.IPv4Network, settings: dict, keep: bool):
        self.root, self.bridge, self.subnet, self.settings, self.keep = root, bridge, subnet, settings, keep
        self.host = f"unix://{root / 'docker.sock'}"
        self.proc: subprocess.Popen | None = None
        self.rules: list[list[str]] = []
        self.made_bridge = False
        self.forwarding_was: str | None = None

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in (os.environ if base is None else base).items() if k not in DROPPED_ENV}
        return dict(env, DOCKER_HOST=self.host, BUILDX_BUILDER="default")

    def docker(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", *args], capture_output=True, text=True, check=False, env=self.env())

    def __enter__(self) -> PrivateEngine:
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self) -> None:
        self.root.mkdir(parents=True)
        if len(str(self.root / "exec" / "containerd" / "containerd.sock.ttrpc")) > 100:
            raise SystemExit(f"{self.root} is too long a path for the daemon's sockets: use a shorter --work")
        gateway = next(self.subnet.hosts())
        cp = _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        if cp.returncode != 0:
            raise SystemExit(f"cannot make the bridge {self.bridge}: {cp.stderr.strip()}")
        self.made_bridge = True
        for cmd in (
            ["ip", "addr", "add", f"{gateway}/{self.subnet.prefixlen}", "dev", self.bridge],
            ["ip", "link", "set", self.bridge, "up"],
        ):
            subprocess.run(cmd, check=True, capture_output=True)
        for rule in nat_rules(self.bridge, str(self.subnet)):
            table, chain, *spec = rule[1], rule[2], *rule[3:]
            where = ["-I", chain, "1"] if table == "filter" else ["-A", chain]
            cp = _run(["iptables", "-t", table, *where, *spec])
            if cp.returncode != 0:
                raise SystemExit(f"cannot add the iptables rule {' '.join(rule)}: {cp.stderr.strip()}")
            self.rules.append(rule)
        fwd = Path("/proc/sys/net/ipv4/ip_forward")
        if fwd.read_text().strip() != "1":
            self.forwarding_was = fwd.read_text().strip()
            fwd.write_text("1\n")
        (self.root / "daemon.json").write_text(json.dumps(self.settings, indent=1) + "\n")
        log = open(self.root / "dockerd.log", "w")
        self.proc = subprocess.Popen(
            dockerd_argv(self.root, self.bridge), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        for _ in range(120):
            if self.proc.poll() is not None:
                tail = (self.root / "dockerd.log").read_text(errors="replace").splitlines()[-15:]
                raise SystemExit("the private dockerd stopped at once:\n  " + "\n  ".join(tail))
            if self.docker("info").returncode == 0:
                return
            time.sleep(1)
        raise SystemExit(
            f"the private dockerd did not answer within 2 minutes; see {self.root / 'dockerd.log'}"
        )

    def facts(self) -> dict:
        info = json.loads(self.docker("info", "--format", "{{json .}}").stdout or "{}")
        bx = self.docker("buildx", "inspect")
        buildkit = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in bx.stdout.splitlines()
                if ln.strip().startswith("BuildKit")
            ),
            None,
        )
        return {
            "server_version": info.get("ServerVersion"),
            "storage_driver": info.get("Driver"),
            "docker_root": info.get("DockerRootDir"),
            "containerd": (info.get("ContainerdCommit") or {}).get("ID"),
            "buildkit": buildkit,
            "buildx_driver": next(
                (ln.split(":", 1)[1].strip() for ln in bx.stdout.splitlines() if ln.startswith("Driver")),
                None,
            ),
        }

    def image_ids(self) -> set[str]:
        cp = self.docker("image", "ls", "--all", "--no-trunc", "--format", "{{.ID}}")
        return set(cp.stdout.split())

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the group this script started: dockerd's own
                self.proc.wait()
        pidfile = self.root / "exec" / "containerd" / "containerd.pid"
        if pidfile.is_file():  # its containerd, should dockerd have left it
            try:
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
            except (ValueError, ProcessLookupError):
                pass
        for rule in reversed(self.rules):
            _run(["iptables", "-t", rule[1], "-D", rule[2], *rule[3:]])
        self.rules = []
        if self.made_bridge:
            _run(["ip", "link", "del", self.bridge])
            self.made_bridge = False
        if self.forwarding_was is not None:
            Path("/proc/sys/net/ipv4/ip_forward").write_text(self.forwarding_was + "\n")
        if not self.keep:
            for d in ("data", "exec"):
                bootstrap.remove_tree(self.root / d)


# ------------------------------------------------------------------------------------------ --old-rev
def readme_commands(readme: str) -> tuple[list[str], list[str]]:
    """A README's main command: the words after `rvport` of the `rvport build` and the `rvport verify
    artifacts` on its first line holding both (the quick start's `... && rvport build ... && rvport verify
    artifacts ...`;
    `rvport` may be a path to it, `.venv/bin/rvport`)."""
    for line in readme.splitlines():
        build = verify = None
        for part in line.split("&&"):
            try:
                words = shlex.split(part)
            except ValueError:
                continue
            if not words or Path(words[0]).name != "rvport":
                continue
            if words[1:2] == ["build"] and build is None:
                build = words[1:]
            elif words[1:3] == ["verify", "artifacts"] and verify is None:
                verify = words[1:]
        if build and verify:
            return build, verify
    raise SystemExit(
        "the README names no line with both `rvport build ...` and `rvport verify artifacts ...`"
    )


def run_args(
    build: list[str] | tuple[str, ...], verify: list[str] | tuple[str, ...], out: Path, verify_json: Path
) -> tuple[list[str], list[str]]:
    """The two commands' arguments for one run: the build's output directory (`--output DIR`, else `out`)
    made `out`, also in verify's paths (DIR, DIR/...); --json VERIFY_JSON added to verify."""
    build, where = list(build), "out"
    for i, w in enumerate(build):
        if w in ("--output", "-o") and i + 1 < len(build):
            where, build[i + 1] = build[i + 1], str(out)
            break
        if w.startswith("--output="):
            where, build[i] = w.split("=", 1)[1], f"--output={out}"
            break
    else:
        build += ["--output", str(out)]
    where = where.rstrip("/") or "/"
    moved = [
        str(out)
        if w.rstrip("/") == where
        else str(out / w[len(where) + 1 :])
        if w.startswith(where + "/")
        else w
        for w in verify
    ]
    return build, [*moved, "--json", str(verify_json)]


class OldRev(NamedTuple):
    """A revision of rvport installed apart from this checkout: its tree (git archive) and a venv of its
    own."""

    commit: str
    src: Path  # the tree: where its rvport runs (it finds recipes/, dockerfiles/, toolchains/ there)
    venv: Path
    build: tuple[str, ...]  # its README's two commands, the words after `rvport`
    verify: tuple[str, ...]

    @property
    def short(self) -> str:
        return self.commit[:7]

    @property
    def command(self) -> list[str]:
        return [str(self.venv / "bin" / "rvport")]


def old_rev_setup(root: Path, commit: str, dest: Path, python: str) -> list[list[str]]:
    """The commands that install `commit` of the repository at `root` under `dest`: its tree in dest/src
    (git archive), a fresh venv in dest/venv, the tree installed into it (not editable, pip's defaults)."""
    tar = dest / "src.tar"
    return [
        ["git", "-C", str(root), "archive", "--format=tar", "--prefix=src/", "-o", str(tar), commit],
        ["tar", "-xf", str(tar), "-C", str(dest)],
        [python, "-m", "venv", str(dest / "venv")],
        [str(dest / "venv" / "bin" / "python"), "-m", "pip", "install", str(dest / "src")],
    ]


def install_old_rev(root: Path, rev: str, under: Path) -> OldRev:
    """Revision `rev` installed in under/rev-COMMIT (not timed); its README's commands read from its tree."""
    cp = _run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"])
    if cp.returncode != 0 or not cp.stdout.strip():
        raise SystemExit(f"--old-rev {rev}: not a commit of {root} {cp.stderr.strip()}".rstrip())
    commit = cp.stdout.strip()
    dest = under / f"rev-{commit[:7]}"
    dest.mkdir(parents=True)
    log = dest / "install.log"
    print(f"installing rvport {commit[:7]} ({rev}) in {dest} (not timed); log {log}", flush=True)
    with open(log, "w") as f:
        for cmd in old_rev_setup(root, commit, dest, sys.executable):
            f.write(f"$ {shlex.join(cmd)}\n")
            f.flush()
            if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False).returncode != 0:
                raise SystemExit(f"installing {commit[:7]} failed at `{shlex.join(cmd)}`: see {log}")
    (dest / "src.tar").unlink()
    readme = dest / "src" / "README.md"
    build, verify = readme_commands(readme.read_text() if readme.is_file() else "")
    if not (dest / "venv" / "bin" / "rvport").is_file():
        raise SystemExit(f"{commit[:7]} installed no `rvport` console script in {dest / 'venv' / 'bin'}")
    return OldRev(commit, dest / "src", dest / "venv", tuple(build), tuple(verify))


# ------------------------------------------------------------------------------------------ one run
def fresh_cargo_home(dest: Path) -> Path:
    """An empty cargo home with the user's cargo configuration (mirrors, proxies), never their registry
    cache."""
    dest.mkdir(parents=True)
    src = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")
    for name in ("config.toml", "config"):
        if (src / name).is_file():
            shutil.copyfile(src / name, dest / name)
    return dest


def steps(
    result: dict, verify_wall: float, total: float, *, other_rev: bool = False
) -> dict[str, float | None]:
    """Where a run's time went, from its result.json: seconds per step, with `other` the rest of `total`.

    None (n/a) for a time the result.json does not record: a base image without `duration_s` (older
    revisions), the bases then together as one row from the stages' "base" timings; with `other_rev` (the
    result.json of another revision of rvport, which may not time every step this one does), also a step no
    stage times."""
    out: dict[str, float | None] = {}
    bases = [b for b in (result.get("base_images") or {}).values() if isinstance(b, dict)]
    for b in sorted(bases, key=lambda b: (b.get("platform") != "linux/riscv64", str(b.get("spec")))):
        what = "riscv64 base" if b.get("platform") == "linux/riscv64" else "build-platform base"
        out[f"{what} {b.get('spec')}"] = (b["duration_s"] or 0.0) if "duration_s" in b else None
    stages = [s for s in result.get("stages") or [] if isinstance(s, dict)]
    t = [s.get("timings") or {} for s in stages]

    def timed(name: str, x: list[dict]) -> float | None:
        if other_rev and not any(name in d for d in x):
            return None
        return sum(d.get(name) or 0.0 for d in x)

    if any(v is None for v in out.values()):
        out[BASES_TOGETHER] = sum(d.get("base") or 0.0 for d in t)
    side_by_side = [k for k in out if k != BASES_TOGETHER] if any("images" in d for d in t) else []
    if side_by_side:  # images made side by side (images_ahead): the bases' times overlap, the waits do not
        out[WAITED] = timed("images", t)
    out["toolchain images (apt, emulated)"] = timed("toolchain", t)
    out["accelerated prefix images"] = timed("accelerated", t)
    out["sources (fetch, unpack, vendor)"] = timed("fetch", t)
    for s, d in zip(stages, t, strict=False):
        out[f"{s.get('recipe')} wheel build"] = timed("build", [d])
    out["verify in the stages"] = timed("verify", t)
    # the smoke test, and (since issue 24) its wait for the smoke image made beside the build
    smoke = [timed(k, t) for k in ("smoke_image", "smoke")]
    out["smoke tests (image and test)"] = None if smoke[1] is None else sum(v or 0.0 for v in smoke)
    out["rvport verify artifacts"] = verify_wall
    out["other (plan, contexts, export, start-up)"] = total - sum(
        v for k, v in out.items() if v is not None and k not in side_by_side
    )
    return out


def wheels(artifacts: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(artifacts.rglob("*.whl"))}


def image_ids(result: dict) -> set[str]:
    ids = {b.get("image_id") for b in (result.get("base_images") or {}).values() if isinstance(b, dict)}
    for s in result.get("stages") or []:
        ids |= {v for v in (s.get("images") or {}).values() if isinstance(v, str) and v.startswith("sha256:")}
    return {i for i in ids if isinstance(i, str)}


def one_run(
    name: str,
    method: str | None,
    run_dir: Path,
    args: argparse.Namespace,
    subnet,
    old_rev: OldRev | None = None,
) -> dict:
    """The README's two commands from nothing in a private engine; what they took and made. With `old_rev`,
    that revision's rvport and its README's commands (no RVPORT_BOOTSTRAP: pass method None)."""
    cache = run_dir / "cache"
    drop = ("RVPORT_BOOTSTRAP",) if old_rev is None else ("RVPORT_BOOTSTRAP", "PYTHONPATH")
    env_base = {k: v for k, v in os.environ.items() if k not in drop}
    env_base.update(RVPORT_CACHE_DIR=str(cache), CARGO_HOME=str(fresh_cargo_home(run_dir / "cargo-home")))
    if method:
        env_base["RVPORT_BOOTSTRAP"] = method
    settings = daemon_settings(Path("/etc/docker/daemon.json"), args.storage_driver)
    res: dict = {"way": name, "RVPORT_BOOTSTRAP": method, "dir": str(run_dir)}
    if old_rev is not None:
        res.update(label=f"{name} (rev {old_rev.short})", rev=old_rev.commit)
    try:
        _measure(res, env_base, run_dir, settings, args, subnet, old_rev)
    finally:
        if not args.keep:
            bootstrap.remove_tree(cache)
            shutil.rmtree(run_dir / "cargo-home", ignore_errors=True)
    return res


def _measure(
    res: dict,
    env_base: dict[str, str],
    run_dir: Path,
    settings: dict,
    args: argparse.Namespace,
    subnet,
    old_rev: OldRev | None = None,
) -> None:
    out, cache, name, method = run_dir / "out", run_dir / "cache", res["way"], res["RVPORT_BOOTSTRAP"]
    build_args, verify_args = run_args(
        *((old_rev.build, old_rev.verify) if old_rev else (BUILD, VERIFY)), out, run_dir / "verify.json"
    )
    command, cwd = (old_rev.command, old_rev.src) if old_rev else (None, None)  # None: this checkout's
    with PrivateEngine(
        run_dir / "engine",
        bridge=f"rvb{os.getpid() % 100000}",
        subnet=subnet,
        settings=settings,
        keep=args.keep,
    ) as engine:
        res["engine"] = dict(engine.facts(), settings=settings)
        env = engine.env(env_base)
        if old_rev is None:
            how = f"RVPORT_BOOTSTRAP={method or '(unset: the default)'}"
        else:
            res["rvport"] = {
                "commit": old_rev.commit,
                "command": command,
                "cwd": str(cwd),
                "build": build_args,
                "verify": verify_args,
            }
            how = f"rvport {old_rev.short} ({command[0]}, in {cwd}), RVPORT_BOOTSTRAP unset"
        print(
            f"== {res.get('label', name)}: {how}; engine {engine.host} "
            f"(dockerd {res['engine']['server_version']}, {res['engine']['storage_driver']}, BuildKit "
            f"{res['engine']['buildkit']}); cache {cache}",
            flush=True,
        )
        if old_rev is not None:
            print(f"   rvport {shlex.join(build_args)}\n   rvport {shlex.join(verify_args)}", flush=True)
        t0 = time.monotonic()
        with common.LoadAverage() as load:
            rc_build, wall_build = common.rvport(
                build_args, log=run_dir / "build.log", env=env, command=command, cwd=cwd
            )
            rc_verify, wall_verify = common.rvport(
                verify_args, log=run_dir / "verify.log", env=env, command=command, cwd=cwd
            )
        total = time.monotonic() - t0
        result = json.loads((out / "result.json").read_text()) if (out / "result.json").is_file() else {}
        missing = image_ids(result) - engine.image_ids()
    verify = json.loads((run_dir / "verify.json").read_text()) if (run_dir / "verify.json").is_file() else {}
    built = {a.get("path"): a.get("sha256") for a in result.get("artifacts") or [] if isinstance(a, dict)}
    res.update(
        total=total,
        build=wall_build,
        verify=wall_verify,
        rc_build=rc_build,
        rc_verify=rc_verify,
        load=load.summary(),
        status=result.get("status"),
        steps=steps(result, wall_verify, total, other_rev=old_rev is not None),
        wheels=wheels(out / "artifacts") if (out / "artifacts").is_dir() else {},
        verify_ok=bool(verify.get("ok")),
        verify_summary=verify.get("summary"),
        in_private_engine=not missing,
        result_artifacts=built,
    )
    res["ok"] = (
        rc_build == 0
        and rc_verify == 0
        and res["status"] == "ok"
        and res["verify_ok"]
        and len(res["wheels"]) == len(RECIPES)
    )
    print(
        f"   {total:.0f}s (build {wall_build:.0f}s rc={rc_build}, verify {wall_verify:.0f}s rc={rc_verify}); "
        f"load average {load.describe()}; {len(res['wheels'])} wheels, verified: {res['verify_ok']}; "
        f"every image result.json names is in the private engine: {not missing}",
        flush=True,
    )


# ------------------------------------------------------------------------------------------ report
def saved(old: float | None, new: float | None) -> str:
    return f"{(1 - new / old) * 100:5.1f}%" if old and new is not None and old > 0 else "    -"


def ratio(old: float | None, new: float | None) -> str:
    return f"{old / new:5.2f}x" if new and old is not None and new > 0 else "    -"


def _seconds(v: float | None, width: int) -> str:
    return f"{v:>{width - 1}.0f}s" if v is not None else f"{'n/a':>{width}}"


def _with_bases_together(steps: dict, other: dict) -> dict:
    """`steps` with the bases together as one row when `other` has only that row (its result.json timed no
    base on its own, the row is its stages' "base" timings): the sum of this run's own base rows, None if one
    is unknown."""
    if BASES_TOGETHER not in other or BASES_TOGETHER in steps:
        return steps
    own = [v for k, v in steps.items() if k.startswith(("riscv64 base", "build-platform base"))]
    return dict(steps, **{BASES_TOGETHER: None if None in own else sum(own)})


def report(old: dict, new: dict) -> list[str]:
    """The step table, the totals, the load averages and the held-equal share. A run of another revision
    (`rev`) may lack steps: n/a there, and no held-equal share (the code differs in more than the base)."""
    la, lb = old.get("label", "old"), new.get("label", "new")
    wa, wb = max(9, len(la) + 1), max(9, len(lb) + 1)
    other_rev = "rev" in old or "rev" in new
    sa, sb = (
        _with_bases_together(old["steps"], new["steps"]),
        _with_bases_together(new["steps"], old["steps"]),
    )
    lines = [f"{'':44}{la:>{wa}}{lb:>{wb}}{'old/new':>9}{'saved':>8}"]
    names = list(dict.fromkeys([*sa, *sb]))
    missing = None if other_rev else 0.0
    for n in names:
        a, b = sa.get(n, missing), sb.get(n, missing)
        lines.append(f"{n:44}{_seconds(a, wa)}{_seconds(b, wb)}{ratio(a, b):>9}{saved(a, b):>8}")
    lines.append(
        f"{'total (rvport build + rvport verify)':44}{_seconds(old['total'], wa)}{_seconds(new['total'], wb)}"
        f"{ratio(old['total'], new['total']):>9}{saved(old['total'], new['total']):>8}"
    )
    lo, ln = old["load"], new["load"]
    lines.append(
        f"{'load average (1 min): mean, range':44}{lo['mean']:>{wa}.1f}{ln['mean']:>{wb}.1f}   "
        f"{la} {lo['min']:.1f}-{lo['max']:.1f}, {lb} {ln['min']:.1f}-{ln['max']:.1f} on {lo['cpus']} CPUs"
    )
    if abs(lo["mean"] - ln["mean"]) > 0.5 * (lo["cpus"] or 1):
        lines.append("   the two runs saw different loads: the ratio is skewed towards the quieter run")
    held = None if other_rev else held_equal(old, new)
    if held:
        lines.append(
            f"with the steps the way does not change held equal (only the riscv64 base differs): saved "
            f"{held[0]:.1f}% (the old run's other steps) to {held[1]:.1f}% (the new run's)"
        )
    if other_rev:
        lines.append(
            "no share with the other steps held equal: two revisions of rvport differ in more than the base"
        )
    return lines


def held_equal(old: dict, new: dict) -> tuple[float, float] | None:
    """The share saved if both runs had spent the same on everything but the riscv64 base (the one step the
    way changes): once with the old run's other steps, once with the new run's. Load noise in the other steps
    (a compile slowed by other work) then counts for neither way."""
    key = next((k for k in old["steps"] if k.startswith("riscv64 base")), None)
    if key is None or key not in new["steps"]:
        return None
    a, b = old["steps"][key], new["steps"][key]
    if a is None or b is None:
        return None
    out = []
    for rest in (old["total"] - a, new["total"] - b):
        out.append((1 - (rest + b) / (rest + a)) * 100 if rest + a > 0 else 0.0)
    return out[0], out[1]


def wheel_lines(old: dict, new: dict) -> list[str]:
    """Whether the two runs made the same wheels (sha256), wheel by wheel. Two revisions may build other
    wheels (other recipe versions): reported, never a failure."""
    la, lb = old.get("label", "old"), new.get("label", "new")
    same = old["wheels"] == new["wheels"] and bool(old["wheels"])
    lines = [f"the wheels' sha256 agree between the two runs: {same}"]
    if not same and ("rev" in old or "rev" in new):
        lines.append("   (two revisions of rvport: their wheels may differ; reported, not a failure)")
    for whl in sorted(set(old["wheels"]) | set(new["wheels"])):
        a, b = old["wheels"].get(whl), new["wheels"].get(whl)
        lines.append(f"   {whl}: {a}" if a == b else f"   {whl}: {la} {a or '-'}, {lb} {b or '-'}")
    return lines


def main() -> int:
    common.stop_on_signals()  # Ctrl-C or a kill stops rvport, then the engine, and removes what it made
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--work", type=Path, default=None, help="where the run directories go (default: a temporary one)"
    )
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the engines' data roots and the caches (and --old-rev's tree and venv)",
    )
    ap.add_argument("--subnet", default="10.199.0.0/24", help="the private engine's bridge network")
    ap.add_argument(
        "--storage-driver", default=None, help="the private engine's (default: the host daemon.json's)"
    )
    ap.add_argument("--only", choices=[w for w, _ in WAYS], help="one way only (no comparison)")
    ap.add_argument(
        "--new-first", action="store_true", help="run the new way first (alternate between reruns)"
    )
    ap.add_argument(
        "--old-rev",
        metavar="REV",
        default=None,
        help="the old way is the rvport of git revision REV of this repository, with its README's "
        "commands (e.g. cedd32c, the code issue #17 was filed against)",
    )
    args = ap.parse_args()
    if os.geteuid() != 0:
        ap.error("run as root: it starts a dockerd, makes a bridge and its NAT rules, and debootstraps")
    for tool in (
        "dockerd",
        "docker",
        "ip",
        "iptables",
        "debootstrap",
        *(("git", "tar") if args.old_rev else ()),
    ):
        if shutil.which(tool) is None:
            ap.error(f"{tool} is not installed (scripts/setup-host installs what rvport needs)")
    subnet = free_subnet(args.subnet, _routes())
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rvport-bench-first-run-", dir=args.work))
    print(
        f"work directory: {work}; {platform.machine()}, {os.cpu_count()} CPUs, kernel {platform.release()}; "
        f"load average now {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    old_rev = None
    if args.old_rev and args.only != "new":
        old_rev = install_old_rev(ROOT, args.old_rev, work / "old")
    runs = []
    try:
        for name, method in WAYS[::-1] if args.new_first else WAYS:
            if args.only and name != args.only:
                continue
            if name == "old" and old_rev is not None:
                runs.append(one_run(name, None, work / name, args, subnet, old_rev))
            else:
                runs.append(one_run(name, method, work / name, args, subnet))
    finally:
        if old_rev is not None and not args.keep:
            for d in (old_rev.venv, old_rev.src):
                shutil.rmtree(d, ignore_errors=True)
    runs.sort(key=lambda r: r["way"] != "old")
    (work / "bench.json").write_text(json.dumps({"runs": runs}, indent=1))
    print()
    if len(runs) == 2:
        old, new = runs
        print("\n".join(report(old, new)))
        print(f"both runs built and verified all {len(RECIPES)} wheels: {old['ok'] and new['ok']}")
        print("\n".join(wheel_lines(old, new)))
    print(f"details: {work / 'bench.json'}; logs and wheels in {work}/old, {work}/new")
    return 0 if runs and all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
