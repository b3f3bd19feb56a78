"""Executes a Plan stage by stage in Docker buildx; exports artifacts; writes result.json.

Per stage: prepare the verified source tree (fetch), make sure the toolchain image exists, build with no
network, check the expected outputs, verify them, run the smoke test, then commit the artifacts to the
content-addressed artifact cache and copy them into the output directory. Nothing half-made is ever left in
the output or the cache: every result is made in a temporary directory and renamed into place.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rvport.build.modes import accelerated, cross

from rvport.build import buildx, render as dockerfiles

from rvport import manifest
from rvport import resources
from rvport.build.images import BaseImage, ensure_base, load_base_spec
from rvport.errors import BuildFailed, Problem, RvportError, VerifyFailed
from rvport.plan.planner import Mode, Plan, Stage
from rvport.cli.progress import Reporter
from rvport.sources.cache import sha256_file
from rvport.sources.fetch import Fetcher, FetchOptions, ca_bundle
from rvport.sources.tree import prepare_tree
from rvport.verify import provenance

RUNNER_FORMAT = 2   # bump when the way stages are built changes, so old artifact cache entries are not reused
REPAIR_REPORT = ".rvport-repair"    # what wheel-repair.sh leaves beside the wheels, for the runner only


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    output: Path
    fetch: FetchOptions
    builder: str | None = None
    base_image: str | None = None       # a digest-pinned image instead of the bootstrapped base
    smoke: bool = True
    verify: bool = True
    no_cache: bool = False              # compile afresh: skip the artifact cache and BuildKit's layer cache
    cache_to: Path | None = None        # buildx --cache-to type=local,dest=DIR,mode=max on the stage builds
    cache_from: Path | None = None      # buildx --cache-from type=local,src=DIR


@dataclass
class StageRecord:
    """What happened to one stage; becomes one entry of result.json."""

    stage: Stage
    status: str = "not run"             # ok | cached | failed | interrupted | not run
    timings: dict[str, float] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)
    artifacts: list[dict] = field(default_factory=list)
    verify: dict | None = None
    smoke: dict | None = None
    manylinux: list[dict] = field(default_factory=list)   # wheel repair: tag, grafted libraries, auditwheel's words
    sources: list[dict] = field(default_factory=list)
    toolchain_packages: dict[str, str] = field(default_factory=dict)
    toolchain: dict | None = None       # cross stages: the cross toolchain used (rvport/cross.py)
    key: str | None = None
    build_command: str | None = None    # the buildx command that built the artifacts (kept with cached ones)
    error: str | None = None
    log_tail: list[str] = field(default_factory=list)
    log: str | None = None

    def to_json(self) -> dict:
        s = self.stage
        return {
            "recipe": s.name, "version": s.recipe.version, "kind": s.recipe.kind.value, "mode": s.mode.value,
            "platform": s.platform, "status": self.status, "timings": {k: round(v, 2) for k, v in self.timings.items()},
            "commands": list(s.commands), "env": dict(sorted(s.env.items())), "images": self.images,
            "key": self.key, "plan_key": s.key, "artifacts": self.artifacts, "verify": self.verify,
            "smoke": self.smoke, "manylinux": self.manylinux, "sources": self.sources, "toolchain_packages": self.toolchain_packages,
            "toolchain": self.toolchain, "build_command": self.build_command,
            "error": self.error, "log_tail": self.log_tail, "log": self.log,
        }


class _Timer:
    def __init__(self, rec: StageRecord, name: str):
        self.rec, self.name = rec, name

    def __enter__(self) -> None:
        self.t0 = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.rec.timings[self.name] = self.rec.timings.get(self.name, 0.0) + time.monotonic() - self.t0


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _link_tree(src: Path, dest: Path) -> None:
    """Copy a tree with hard links where possible (same filesystem), plain copies elsewhere."""
    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    shutil.copytree(src, dest, symlinks=True, copy_function=link)


def _matches(root: Path, pattern: str) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and fnmatch.fnmatch(p.name, pattern))


def _describe(path: Path, root: Path) -> dict:
    return {"path": str(path.relative_to(root)), "size": path.stat().st_size, "sha256": sha256_file(path)}


# -------------------------------------------------------------------------- stage materialising (shared)
# The runner and the bake export (rvport/bake.py) make a stage's Dockerfiles and build context with these,
# so `docker buildx bake` on an exported plan builds exactly what `rvport build` builds.
def toolchain_dockerfile(base_tag: str, qemu_cpu: str, packages: tuple[str, ...]) -> dockerfiles.Rendered:
    return dockerfiles.render("toolchain", {"BASE": base_tag, "QEMU_CPU": qemu_cpu,
                                            "PACKAGES": dockerfiles.packages_arg(packages)})


def toolchain_tag(stage_name: str, what: str, base_image_id: str, rendered: dockerfiles.Rendered) -> tuple[str, str]:
    """(image tag, key) of a stage's toolchain image: made once per base image and Dockerfile."""
    key = _key(base_image_id, rendered.sha256)
    return f"rvport/toolchain:{stage_name}-{what}-{key[:12]}", key


def build_dockerfile(st: Stage, toolchain: str, profile_name: str) -> tuple[dockerfiles.Rendered, str]:
    """(the stage's build Dockerfile, its build script)."""
    rendered = dockerfiles.stage_dockerfile(st, toolchain, profile_name)   # cross stages: cross.Dockerfile
    return rendered, dockerfiles.build_script(st.commands)


def stage_context(ctx: Path, tree: Path, rendered: dockerfiles.Rendered, script: str,
                  deps: dict[str, Path], tools: dict[str, Path] | None = None) -> None:
    """Lay out a build stage's context in ctx: src/, deps/<name>/, tools/ (rvport's own pinned tools and their
    stage scripts, as /rvport/tools in the stage), the build script and the Dockerfile."""
    _link_tree(tree, ctx / "src")
    (ctx / "deps").mkdir()
    for dep, path in deps.items():
        _link_tree(path, ctx / "deps" / dep)
    (ctx / "tools").mkdir()
    for name, path in (tools or {}).items():
        shutil.copyfile(path, ctx / "tools" / name)
    (ctx / "rvport-build.sh").write_text(script)
    (ctx / "Dockerfile").write_text(rendered.text)
    (ctx / ".dockerignore").write_text("Dockerfile\n")


def stage_tools(st: Stage, fopts: FetchOptions) -> dict[str, Path]:
    """The files of a stage's pinned tools (fetched and checked like sources) and their stage scripts."""
    if not st.tools:
        return {}
    out: dict[str, Path] = {}
    with Fetcher(options=fopts) as fetcher:
        for tool in st.tools:
            got = fetcher.fetch(tool.source)
            out[got.filename] = got.path
            out[tool.script] = resources.builtin("scripts", tool.script)
    return out


def take_repair_report(files: Path) -> list[dict]:
    """The wheel repair's report (rvport/resources/scripts/wheel-repair.sh), taken out of the artifacts: per
    wheel, the tag it carries now, the libraries grafted into it, and what auditwheel said."""
    report = files / REPAIR_REPORT
    if not report.is_dir():
        return []
    logs = {p.name.removesuffix(".log"): p.read_text(errors="replace").splitlines() for p in report.glob("*.log")}
    shutil.rmtree(report)
    out = []
    for built, lines in sorted(logs.items()):
        repaired = "not repaired" not in lines
        final = next((w for w in sorted(files.rglob("*.whl")) if repaired and w.name != built
                      and w.name.split("-")[:2] == built.split("-")[:2]), None)
        wheel = final or files / built
        platform = wheel.name.removesuffix(".whl").rsplit("-", 1)[-1]
        grafted: list[str] = []
        if final is not None:
            with zipfile.ZipFile(final) as z:
                grafted = sorted(n for n in z.namelist() if ".libs/" in n and not n.endswith("/"))
        out.append({"built": built, "wheel": wheel.name, "repaired": final is not None, "platform": platform,
                    "grafted": grafted, "auditwheel": [l for l in lines if l.strip()][-8:]})
        if final is not None and (files / built).exists():
            (files / built).unlink()
    return out


def repair_disagreements(repairs: list[dict], verify: dict | None) -> list[str]:
    """A repaired wheel must carry the tag rvport verify computes from its ELF files (rvport.verify.manylinux)."""
    computed = {Path(a["path"]).name: (a.get("wheel") or {}).get("manylinux")
                for report in (verify or {}).get("reports", []) for a in report.get("artifacts", [])}
    out = []
    for r in repairs:
        if r["repaired"] and r["wheel"] in computed and computed[r["wheel"]] not in r["platform"].split("."):
            out.append(f"{r['wheel']}: auditwheel tagged {r['platform']}, rvport computes {computed[r['wheel']]}")
    return out


class Runner:
    def __init__(self, plan: Plan, opts: BuildOptions, rep: Reporter):
        self.plan, self.opts, self.rep = plan, opts, rep
        self.profile = plan.request.profile
        self.cache_root = opts.fetch.cache.root
        self.logs = opts.output / "logs"
        self.records = [StageRecord(stage=s) for s in plan.stages]
        self.bases: dict[str, BaseImage] = {}
        self.stage_outputs: dict[str, Path] = {}
        self._ca: Path | None = None

    # ------------------------------------------------------------------------------------------ helpers
    def _tmp(self, prefix: str) -> Path:
        root = self.cache_root / "tmp"
        root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=root))

    def _ca_bundle(self) -> Path | None:
        if self._ca is None:
            try:
                self._ca = self.opts.fetch.ca_bundle or ca_bundle()
            except RvportError:
                self._ca = None
        return self._ca

    def _secrets(self) -> tuple[tuple[str, Path], ...]:
        ca = self._ca_bundle()
        return (("rvport-ca", ca),) if ca else ()

    def _base(self, spec_name: str, platform: str, rec: StageRecord) -> BaseImage:
        key = f"{spec_name}@{platform}"
        if key not in self.bases:
            self.rep.step(rec.stage.name, f"base image {spec_name} ({platform})")
            with _Timer(rec, "base"):
                self.bases[key] = ensure_base(
                    load_base_spec(spec_name), platform=platform, cache_dir=self.cache_root,
                    log_path=self.logs / f"base-{spec_name}.log", builder=self.opts.builder,
                    on_line=lambda l: self.rep.line(rec.stage.name, l), image_override=self.opts.base_image)
        return self.bases[key]

    def _image_with_packages(self, base: BaseImage, packages: tuple[str, ...], what: str,
                             rec: StageRecord) -> tuple[str, dict[str, str]]:
        """base + Debian packages, as a loaded image (made once per inputs); returns (tag, packages)."""
        if not packages:
            return base.tag, {}
        return self._image(base, toolchain_dockerfile(base.tag, self.profile.qemu_cpu, packages), what, rec)

    def _image(self, base: BaseImage, rendered: dockerfiles.Rendered, what: str,
               rec: StageRecord) -> tuple[str, dict[str, str]]:
        """A toolchain image from `rendered` on `base`, built once per content; returns (tag, packages)."""
        tag, key = toolchain_tag(rec.stage.name, what, base.image_id, rendered)
        if buildx.image_info(tag) is None:
            ctx = self._tmp(f"tc-{rec.stage.name}-")
            try:
                (ctx / "Dockerfile").write_text(rendered.text)
                buildx.build(buildx.BuildSpec(context=ctx, dockerfile=ctx / "Dockerfile", platform=base.platform,
                                              tag=tag, load=True, builder=self.opts.builder,
                                              secrets=self._secrets(), labels=(("org.rvport.key", key),)),
                             log_path=self._log(rec), on_line=lambda l: self.rep.line(rec.stage.name, l))
            finally:
                shutil.rmtree(ctx, ignore_errors=True)
        pkgs = self._toolchain_packages(tag)
        return tag, pkgs

    def _cross_toolchain(self, rec: StageRecord) -> str:
        """Cross stages: the build-platform base plus the kind's riscv64 cross toolchain (rvport/cross.py)."""
        st = rec.stage
        xbase = self._base(cross.BASE, st.platform, rec)
        rec.images["build_base"] = xbase.image_id
        tag, rec.toolchain_packages = self._image(
            xbase, dockerfiles.cross_toolchain_dockerfile(st.recipe, xbase.tag), "cross", rec)
        rec.toolchain = cross.describe(st.recipe, st.platform, rec.toolchain_packages,
                                       self._toolchain_packages(tag, "/rvport-cross-toolchain.txt"))
        return tag

    def _toolchain_packages(self, tag: str, path: str = "/rvport-toolchain-packages.txt") -> dict[str, str]:
        try:
            cp = buildx.run_container(tag, ["cat", path], check=False, timeout=120)
        except RvportError:
            return {}
        out = {}
        for line in cp.stdout.splitlines():
            k, _, v = line.partition("=")
            if k:
                out[k] = v
        return out

    def _log(self, rec: StageRecord) -> Path:
        self.logs.mkdir(parents=True, exist_ok=True)
        rec.log = str(self.logs / f"{rec.stage.name}.log")
        return Path(rec.log)

    # ------------------------------------------------------------------------------------------ stages
    def run(self) -> dict:
        started = time.time()
        status = "ok"
        failing: str | None = None
        error: RvportError | None = None
        try:
            for rec in self.records:
                self.rep.begin(rec.stage.name, f"{rec.stage.recipe.ref} [{rec.stage.mode.value}]")
                try:
                    self._run_stage(rec)
                except KeyboardInterrupt:
                    rec.status = "interrupted"
                    self.rep.end(rec.stage.name, "interrupted")
                    raise
                except RvportError as e:
                    rec.status = "failed"
                    rec.error = e.render()
                    rec.log_tail = getattr(e, "log_tail", None) or _tail(rec.log)
                    self.rep.end(rec.stage.name, "failed")
                    status, failing, error = "failed", rec.stage.name, e
                    break
                self.rep.end(rec.stage.name, rec.status)
        except KeyboardInterrupt:
            status = "interrupted"
            failing = next((r.stage.name for r in self.records if r.status == "interrupted"), None)
            self._write_result(started, status, failing)
            raise
        doc = self._write_result(started, status, failing)
        if error is not None:
            raise error
        return doc

    def _write_result(self, started: float, status: str, failing: str | None) -> dict:
        doc = {
            "schema": manifest.RESULT_SCHEMA, "kind": "rvport-result", "status": status,
            "failing_stage": failing, "tag": self.plan.request.tag, "profile": self.profile.to_json(),
            "host": self.plan.host.to_json(), "builder": self.opts.builder,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "duration_s": round(time.time() - started, 2),
            "base_images": {k: b.to_json() for k, b in self.bases.items()},
            "stages": [r.to_json() for r in self.records],
            "artifacts": [dict(a, recipe=r.stage.name) for r in self.records for a in r.artifacts],
        }
        manifest.write(self.opts.output / "result.json", doc)
        provenance.write_beside(self.opts.output, doc, self.plan.to_json(),   # SLSA v1, beside it (docs/verify.md)
                                buildx.builder_info(self.opts.builder) if status == "ok" else None)
        return doc

    def _run_stage(self, rec: StageRecord) -> None:
        st = rec.stage
        name = st.name
        log = self._log(rec)
        on_line = lambda l: self.rep.line(name, l)  # noqa: E731

        self.rep.step(name, "fetching and preparing sources")
        with _Timer(rec, "fetch"):
            tree = prepare_tree(st.recipe, self.opts.fetch)
        rec.sources = [f.to_json() for f in tree.fetched]

        base = self._base(st.recipe.toolchain.base, "linux/riscv64", rec)
        rec.images["base"] = base.image_id
        self.rep.step(name, "toolchain image")
        with _Timer(rec, "toolchain"):
            if st.mode is Mode.CROSS:
                tc_tag = self._cross_toolchain(rec)
            else:
                tc_tag, rec.toolchain_packages = self._image_with_packages(base, st.recipe.toolchain.debian,
                                                                           "build", rec)
        rec.images["toolchain"] = buildx.image_info(tc_tag)["id"]

        rendered, script = build_dockerfile(st, tc_tag, self.profile.name)
        if st.mode is Mode.ACCELERATED:   # riscv64 stage, native cross compilers: rvport/accelerated.py
            rendered = accelerated.stage_dockerfile(self, rec, base, tc_tag)
        dep_keys = [self._record(d).key or "" for d in st.depends]
        rec.key = _key(f"runner-{RUNNER_FORMAT}", st.key, tree.key, rec.images["toolchain"], rendered.sha256,
                       script, *dep_keys, str(self.opts.smoke), str(self.opts.verify))
        store = self.cache_root / "artifacts" / rec.key
        if (store / "manifest.json").is_file() and not self.opts.no_cache:
            self.rep.step(name, "unchanged inputs: reusing verified artifacts")
            meta = json.loads((store / "manifest.json").read_text())
            rec.verify, rec.smoke = meta.get("verify"), meta.get("smoke")
            rec.build_command = meta.get("build_command")
            rec.manylinux = meta.get("manylinux") or []
            rec.status = "cached"
        else:
            self._build_into_store(rec, tree.path, rendered, script, base, store, log, on_line)
            rec.status = "ok"
        self._export(rec, store)

    def _record(self, name: str) -> StageRecord:
        return next(r for r in self.records if r.stage.name == name)

    def _build_into_store(self, rec: StageRecord, tree: Path, rendered: dockerfiles.Rendered, script: str,
                          base: BaseImage, store: Path, log: Path, on_line: Callable[[str], None]) -> None:
        st = rec.stage
        ctx = self._tmp(f"ctx-{st.name}-")
        out = self._tmp(f"out-{st.name}-")
        try:
            self.rep.step(st.name, "staging the build context")
            stage_context(ctx, tree, rendered, script, {d: self.stage_outputs[d] for d in st.depends},
                          stage_tools(st, self.opts.fetch))
            self.rep.step(st.name, "building (no network)")
            spec = buildx.BuildSpec(context=ctx, dockerfile=ctx / "Dockerfile", platform=st.platform,
                                    output_dir=out / "files", network="none", builder=self.opts.builder,
                                    cache_to=self.opts.cache_to, cache_from=self.opts.cache_from,
                                    no_cache=self.opts.no_cache)
            rec.build_command = buildx.quote(spec.argv())
            with _Timer(rec, "build"):
                buildx.build(spec, log_path=log, on_line=on_line)
            files = out / "files"
            rec.manylinux = take_repair_report(files)
            missing = [o.glob for o in st.recipe.outputs if not _matches(files, o.glob)]
            if missing:
                raise BuildFailed(f"{st.recipe.ref}: the build left no {', '.join(missing)} in $RVPORT_OUT",
                                  hint=f"check the build commands in {st.recipe.file}; full log: {log}")
            if self.opts.verify:
                self.rep.step(st.name, "verifying artifacts")
                with _Timer(rec, "verify"):
                    rec.verify = self._verify(st, files)
                wrong = repair_disagreements(rec.manylinux, rec.verify)
                if wrong:
                    raise VerifyFailed(f"{st.recipe.ref}: auditwheel's tag and the tag rvport computes from the ELF "
                                       "files disagree", problems=[Problem(message=w) for w in wrong],
                                       hint="see stages[].manylinux and stages[].verify in result.json")
            if self.opts.smoke and st.recipe.smoke:
                self.rep.step(st.name, "smoke test in a clean riscv64 container")
                with _Timer(rec, "smoke"):
                    rec.smoke = self._smoke(rec, files, base, log, on_line)
            meta = {"recipe": st.recipe.ref, "key": rec.key, "verify": rec.verify, "smoke": rec.smoke,
                    "build_command": rec.build_command, "manylinux": rec.manylinux,
                    "files": [_describe(p, files) for p in sorted(files.rglob("*")) if p.is_file()]}
            (out / "manifest.json").write_text(manifest.dumps(meta))
            store.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(store, ignore_errors=True)
            os.replace(out, store)     # atomic: the store entry appears complete or not at all
        finally:
            shutil.rmtree(ctx, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)

    def _verify(self, st: Stage, files: Path) -> dict:
        """Verify every expected output at its ISA level; a failure stops the stage with the reasons."""
        from rvport.verify import verify_paths

        reports, failures = [], []
        for o in st.recipe.outputs:
            report = verify_paths(_matches(files, o.glob), self.profile, isa=o.isa, exports=o.exports)
            doc = report.to_json()
            for a in doc["artifacts"]:      # paths relative to the stage's output, not a temporary directory
                a["path"] = str(Path(a["path"]).relative_to(files))
            reports.append(doc)
            failures += [f"{Path(a.path).relative_to(files)}: {r}" for a in report.failed for r in a.all_reasons()]
        if failures:
            raise VerifyFailed(f"{st.recipe.ref}: artifacts failed verification for profile {self.profile.name}",
                               hint="the verdicts are in result.json (stages[].verify)",
                               problems=[Problem(message=f) for f in failures[:10]])
        return {"ok": True, "reports": reports}

    def _smoke(self, rec: StageRecord, files: Path, base: BaseImage, log: Path,
               on_line: Callable[[str], None]) -> dict:
        st = rec.stage
        image, _ = self._image_with_packages(base, st.recipe.smoke_debian, "smoke", rec)
        install, run = dockerfiles.smoke_commands(st.recipe.kind.value, st.recipe.smoke or "")
        rendered = dockerfiles.render("smoke", {"IMAGE": image, "QEMU_CPU": self.profile.qemu_cpu,
                                                "INSTALL": install, "RUN": run})
        ctx = self._tmp(f"smoke-{st.name}-")
        out = self._tmp(f"smoke-out-{st.name}-")
        try:
            _link_tree(files, ctx / "artifacts")
            (ctx / "rvport-smoke").write_text(st.recipe.smoke or "")
            (ctx / "Dockerfile").write_text(rendered.text)
            buildx.build(buildx.BuildSpec(context=ctx, dockerfile=ctx / "Dockerfile", platform="linux/riscv64",
                                          output_dir=out, network="none", builder=self.opts.builder,
                                          no_cache=True),
                         log_path=log, on_line=on_line)
            text = (out / "rvport-smoke.log").read_text(errors="replace")
            return {"status": "passed", "output": text.strip().splitlines()[-5:]}
        finally:
            shutil.rmtree(ctx, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)

    def _export(self, rec: StageRecord, store: Path) -> None:
        """Copy the stage's artifacts into OUTPUT/artifacts/<recipe>/ atomically."""
        files = store / "files"
        final = self.opts.output / "artifacts" / rec.stage.name
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{rec.stage.name}.", dir=final.parent))
        try:
            shutil.rmtree(tmp)
            shutil.copytree(files, tmp)
            old = None
            if final.exists():
                old = final.with_name(f".{final.name}.old-{os.getpid()}")
                os.replace(final, old)
            os.replace(tmp, final)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(tmp)
        rec.artifacts = [_describe(p, self.opts.output / "artifacts") for p in sorted(final.rglob("*"))
                         if p.is_file()]
        self.stage_outputs[rec.stage.name] = final


def _tail(log: str | None, n: int = 30) -> list[str]:
    if not log or not Path(log).is_file():
        return []
    with open(log, errors="replace") as f:
        return [l.rstrip("\n") for l in f.readlines()[-n:]]
