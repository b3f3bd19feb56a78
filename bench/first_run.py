#!/usr/bin/env python3
"""The README's main command from nothing, the old way and the new way, side by side in one run.

    sudo .venv/bin/python bench/first_run.py            # both ways, about 30-50 minutes on 2 cores
    sudo .venv/bin/python bench/first_run.py --keep     # keep both engines' data roots and caches too
    sudo .venv/bin/python bench/first_run.py --new-first   # the new way first (alternate the order between runs)

The command is the README's quick start after setup-host and the venv (the same for both ways, not timed):

    rvport build msgspec sentencepiece tiktoken --profile rvv256 --tag local --output OUT
    rvport verify artifacts OUT/artifacts --profile rvv256          (with --json, to read the verdicts)

run twice, each from nothing: first the old way (RVPORT_BOOTSTRAP=debootstrap: the riscv64 base made by
debootstrap in one run, as when issue #17 was filed), then the new way (rvport's default: the split method,
docs/bootstrap.md). Everything else is the same code.

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
load average is printed beside them. Benchmarks are ratios in one run, never timed assertions. Exit 0 when both
runs built and verified every wheel, 1 otherwise. Logs, result.json and the wheels stay in the work directory
(printed); the engines' data roots and the caches are removed unless --keep.
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import common  # noqa: E402  (bench/ is first on sys.path)
from rvport.build import bootstrap  # noqa: E402

RECIPES = ("msgspec", "sentencepiece", "tiktoken")
PROFILE = "rvv256"
WAYS = (("old", "debootstrap"), ("new", None))     # (name, RVPORT_BOOTSTRAP)
# what the private daemon takes from the host's daemon.json: how it stores and networks, never where
HOST_SETTINGS = ("storage-driver", "storage-opts", "mtu", "dns", "dns-opts", "dns-search")
DROPPED_ENV = ("DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_TLS", "BUILDX_BUILDER")


# ------------------------------------------------------------------------------------------ the engine
def daemon_settings(host_config: Path, storage_driver: str | None) -> dict:
    """The private daemon's config file: HOST_SETTINGS from the host's daemon.json, --storage-driver over it."""
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
    return ["dockerd", "--config-file", str(root / "daemon.json"), "--data-root", str(root / "data"),
            "--exec-root", str(root / "exec"), "--pidfile", str(root / "dockerd.pid"),
            "-H", f"unix://{root / 'docker.sock'}", "--bridge", bridge, "--iptables=false", "--ip6tables=false"]


def nat_rules(bridge: str, subnet: str) -> list[list[str]]:
    """iptables rules (table and rule, without -A/-I/-D) that let the bridge's containers out, and back in."""
    return [["-t", "filter", "FORWARD", "-i", bridge, "-j", "ACCEPT"],
            ["-t", "filter", "FORWARD", "-o", bridge, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED",
             "-j", "ACCEPT"],
            ["-t", "nat", "POSTROUTING", "-s", subnet, "!", "-o", bridge, "-j", "MASQUERADE"]]


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
        for cmd in (["ip", "addr", "add", f"{gateway}/{self.subnet.prefixlen}", "dev", self.bridge],
                    ["ip", "link", "set", self.bridge, "up"]):
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
        self.proc = subprocess.Popen(dockerd_argv(self.root, self.bridge), stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        for _ in range(120):
            if self.proc.poll() is not None:
                tail = (self.root / "dockerd.log").read_text(errors="replace").splitlines()[-15:]
                raise SystemExit("the private dockerd stopped at once:\n  " + "\n  ".join(tail))
            if self.docker("info").returncode == 0:
                return
            time.sleep(1)
        raise SystemExit(f"the private dockerd did not answer within 2 minutes; see {self.root / 'dockerd.log'}")

    def facts(self) -> dict:
        info = json.loads(self.docker("info", "--format", "{{json .}}").stdout or "{}")
        bx = self.docker("buildx", "inspect")
        buildkit = next((ln.split(":", 1)[1].strip() for ln in bx.stdout.splitlines()
                         if ln.strip().startswith("BuildKit")), None)
        return {"server_version": info.get("ServerVersion"), "storage_driver": info.get("Driver"),
                "docker_root": info.get("DockerRootDir"), "containerd": (info.get("ContainerdCommit") or {}).get("ID"),
                "buildkit": buildkit, "buildx_driver": next((ln.split(":", 1)[1].strip() for ln in bx.stdout.splitlines()
                                                              if ln.startswith("Driver")), None)}

    def image_ids(self) -> set[str]:
        cp = self.docker("image", "ls", "--all", "--no-trunc", "--format", "{{.ID}}")
        return set(cp.stdout.split())

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)      # the group this script started: dockerd's own
                self.proc.wait()
        pidfile = self.root / "exec" / "containerd" / "containerd.pid"
        if pidfile.is_file():                                 # its containerd, should dockerd have left it
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


# ------------------------------------------------------------------------------------------ one run
def fresh_cargo_home(dest: Path) -> Path:
    """An empty cargo home with the user's cargo configuration (mirrors, proxies), never their registry cache."""
    dest.mkdir(parents=True)
    src = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")
    for name in ("config.toml", "config"):
        if (src / name).is_file():
            shutil.copyfile(src / name, dest / name)
    return dest


def steps(result: dict, verify_wall: float, total: float) -> dict[str, float]:
    """Where a run's time went, from its result.json: seconds per step, with `other` the rest of `total`."""
    out: dict[str, float] = {}
    for b in sorted(result.get("base_images", {}).values(), key=lambda b: (b["platform"] != "linux/riscv64", b["spec"])):
        what = "riscv64 base" if b["platform"] == "linux/riscv64" else "build-platform base"
        out[f"{what} {b['spec']}"] = b.get("duration_s") or 0.0
    stages = result.get("stages", [])
    t = [s.get("timings", {}) for s in stages]
    out["toolchain images (apt, emulated)"] = sum(x.get("toolchain", 0.0) for x in t)
    out["accelerated prefix images"] = sum(x.get("accelerated", 0.0) for x in t)
    out["sources (fetch, unpack, vendor)"] = sum(x.get("fetch", 0.0) for x in t)
    for s in stages:
        out[f"{s['recipe']} wheel build"] = s.get("timings", {}).get("build", 0.0)
    out["verify in the stages"] = sum(x.get("verify", 0.0) for x in t)
    out["smoke tests (image and test)"] = sum(x.get("smoke", 0.0) for x in t)
    out["rvport verify artifacts"] = verify_wall
    out["other (plan, contexts, export, start-up)"] = total - sum(out.values())
    return out


def wheels(artifacts: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(artifacts.rglob("*.whl"))}


def image_ids(result: dict) -> set[str]:
    ids = {b["image_id"] for b in result.get("base_images", {}).values()}
    for s in result.get("stages", []):
        ids |= {v for v in s.get("images", {}).values() if isinstance(v, str) and v.startswith("sha256:")}
    return ids


def one_run(name: str, method: str | None, run_dir: Path, args: argparse.Namespace, subnet) -> dict:
    """The README's two commands from nothing in a private engine; what they took and made."""
    cache = run_dir / "cache"
    env_base = {k: v for k, v in os.environ.items() if k != "RVPORT_BOOTSTRAP"}
    env_base.update(RVPORT_CACHE_DIR=str(cache), CARGO_HOME=str(fresh_cargo_home(run_dir / "cargo-home")))
    if method:
        env_base["RVPORT_BOOTSTRAP"] = method
    settings = daemon_settings(Path("/etc/docker/daemon.json"), args.storage_driver)
    res: dict = {"way": name, "RVPORT_BOOTSTRAP": method, "dir": str(run_dir)}
    try:
        _measure(res, env_base, run_dir, settings, args, subnet)
    finally:
        if not args.keep:
            bootstrap.remove_tree(cache)
            shutil.rmtree(run_dir / "cargo-home", ignore_errors=True)
    return res


def _measure(res: dict, env_base: dict[str, str], run_dir: Path, settings: dict, args: argparse.Namespace,
             subnet) -> None:
    out, cache, name, method = run_dir / "out", run_dir / "cache", res["way"], res["RVPORT_BOOTSTRAP"]
    with PrivateEngine(run_dir / "engine", bridge=f"rvb{os.getpid() % 100000}", subnet=subnet, settings=settings,
                       keep=args.keep) as engine:
        res["engine"] = dict(engine.facts(), settings=settings)
        env = engine.env(env_base)
        print(f"== {name}: RVPORT_BOOTSTRAP={method or '(unset: the default)'}; engine {engine.host} "
              f"(dockerd {res['engine']['server_version']}, {res['engine']['storage_driver']}, BuildKit "
              f"{res['engine']['buildkit']}); cache {cache}", flush=True)
        t0 = time.monotonic()
        with common.LoadAverage() as load:
            rc_build, wall_build = common.rvport(
                ["build", *RECIPES, "--profile", PROFILE, "--tag", "local", "--output", str(out)],
                log=run_dir / "build.log", env=env)
            rc_verify, wall_verify = common.rvport(
                ["verify", "artifacts", str(out / "artifacts"), "--profile", PROFILE, "--json",
                 str(run_dir / "verify.json")], log=run_dir / "verify.log", env=env)
        total = time.monotonic() - t0
        result = json.loads((out / "result.json").read_text()) if (out / "result.json").is_file() else {}
        missing = image_ids(result) - engine.image_ids()
    verify = json.loads((run_dir / "verify.json").read_text()) if (run_dir / "verify.json").is_file() else {}
    built = {a["path"]: a["sha256"] for a in result.get("artifacts", [])}
    res.update(total=total, build=wall_build, verify=wall_verify, rc_build=rc_build, rc_verify=rc_verify,
               load=load.summary(), status=result.get("status"), steps=steps(result, wall_verify, total),
               wheels=wheels(out / "artifacts") if (out / "artifacts").is_dir() else {},
               verify_ok=bool(verify.get("ok")), verify_summary=verify.get("summary"), in_private_engine=not missing,
               result_artifacts=built)
    res["ok"] = (rc_build == 0 and rc_verify == 0 and res["status"] == "ok" and res["verify_ok"]
                 and len(res["wheels"]) == len(RECIPES))
    print(f"   {total:.0f}s (build {wall_build:.0f}s rc={rc_build}, verify {wall_verify:.0f}s rc={rc_verify}); "
          f"load average {load.describe()}; {len(res['wheels'])} wheels, verified: {res['verify_ok']}; "
          f"every image result.json names is in the private engine: {not missing}", flush=True)


# ------------------------------------------------------------------------------------------ report
def saved(old: float, new: float) -> str:
    return f"{(1 - new / old) * 100:5.1f}%" if old > 0 else "    -"


def ratio(old: float, new: float) -> str:
    return f"{old / new:5.2f}x" if new > 0 else "    -"


def report(old: dict, new: dict) -> list[str]:
    lines = [f"{'':44}{'old':>9}{'new':>9}{'old/new':>9}{'saved':>8}"]
    names = list(dict.fromkeys([*old["steps"], *new["steps"]]))
    for n in names:
        a, b = old["steps"].get(n, 0.0), new["steps"].get(n, 0.0)
        lines.append(f"{n:44}{a:>8.0f}s{b:>8.0f}s{ratio(a, b):>9}{saved(a, b):>8}")
    lines.append(f"{'total (rvport build + rvport verify)':44}{old['total']:>8.0f}s{new['total']:>8.0f}s"
                 f"{ratio(old['total'], new['total']):>9}{saved(old['total'], new['total']):>8}")
    lo, ln = old["load"], new["load"]
    lines.append(f"{'load average (1 min): mean, range':44}{lo['mean']:>9.1f}{ln['mean']:>9.1f}   "
                 f"old {lo['min']:.1f}-{lo['max']:.1f}, new {ln['min']:.1f}-{ln['max']:.1f} on {lo['cpus']} CPUs")
    if abs(lo["mean"] - ln["mean"]) > 0.5 * (lo["cpus"] or 1):
        lines.append("   the two runs saw different loads: the ratio is skewed towards the quieter run")
    held = held_equal(old, new)
    if held:
        lines.append(f"with the steps the way does not change held equal (only the riscv64 base differs): saved "
                     f"{held[0]:.1f}% (the old run's other steps) to {held[1]:.1f}% (the new run's)")
    return lines


def held_equal(old: dict, new: dict) -> tuple[float, float] | None:
    """The share saved if both runs had spent the same on everything but the riscv64 base (the one step the way
    changes): once with the old run's other steps, once with the new run's. Load noise in the other steps
    (a compile slowed by other work) then counts for neither way."""
    key = next((k for k in old["steps"] if k.startswith("riscv64 base")), None)
    if key is None or key not in new["steps"]:
        return None
    a, b = old["steps"][key], new["steps"][key]
    out = []
    for rest in (old["total"] - a, new["total"] - b):
        out.append((1 - (rest + b) / (rest + a)) * 100 if rest + a > 0 else 0.0)
    return out[0], out[1]


def main() -> int:
    common.stop_on_signals()    # Ctrl-C or a kill stops rvport, then the engine, and removes what it made
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=None, help="where the run directories go (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the engines' data roots and the caches")
    ap.add_argument("--subnet", default="10.199.0.0/24", help="the private engine's bridge network")
    ap.add_argument("--storage-driver", default=None, help="the private engine's (default: the host daemon.json's)")
    ap.add_argument("--only", choices=[w for w, _ in WAYS], help="one way only (no comparison)")
    ap.add_argument("--new-first", action="store_true", help="run the new way first (alternate between reruns)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        ap.error("run as root: it starts a dockerd, makes a bridge and its NAT rules, and debootstraps")
    for tool in ("dockerd", "docker", "ip", "iptables", "debootstrap"):
        if shutil.which(tool) is None:
            ap.error(f"{tool} is not installed (scripts/setup-host installs what rvport needs)")
    subnet = free_subnet(args.subnet, _routes())
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rvport-bench-first-run-", dir=args.work))
    print(f"work directory: {work}; {platform.machine()}, {os.cpu_count()} CPUs, kernel {platform.release()}; "
          f"load average now {os.getloadavg()[0]:.1f}", flush=True)
    runs = []
    for name, method in (WAYS[::-1] if args.new_first else WAYS):
        if args.only and name != args.only:
            continue
        runs.append(one_run(name, method, work / name, args, subnet))
    runs.sort(key=lambda r: r["way"] != "old")
    (work / "bench.json").write_text(json.dumps({"runs": runs}, indent=1))
    print()
    if len(runs) == 2:
        old, new = runs
        print("\n".join(report(old, new)))
        print(f"both runs built and verified all {len(RECIPES)} wheels: {old['ok'] and new['ok']}")
        same = old["wheels"] == new["wheels"] and bool(old["wheels"])
        print(f"the wheels' sha256 agree between the two runs: {same}")
        for whl in sorted(set(old["wheels"]) | set(new["wheels"])):
            a, b = old["wheels"].get(whl), new["wheels"].get(whl)
            print(f"   {whl}: {a}" if a == b else f"   {whl}: old {a or '-'}, new {b or '-'}")
    print(f"details: {work / 'bench.json'}; logs and wheels in {work}/old, {work}/new")
    return 0 if runs and all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
