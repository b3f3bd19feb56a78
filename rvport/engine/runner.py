"""Executes a Plan in Docker buildx; exports artifacts; writes result.json.

1. Every stage's verified source tree (fetch), so that a source that cannot be had fails at once.
2. Every image the stages need, made side by side (rvport/engine/prepare.py, as `rvport prepare` makes them:
   the bases, then each stage's toolchain, prefix and runtime FROM images, then in a task of its own its smoke
   image). A stage whose build images could not be made fails when its turn comes, one whose smoke image
   could not be made at its smoke test, as if it had made them then.
3. Stage by stage, once its build images are made: the toolchain image (found now) and the stage's Dockerfile
   (the stage's mode's work, rvport/engine/modes/, done by `modes.setup` in a StageEnv), build with no
   network, check the expected outputs, verify them, run the smoke test (in the smoke image made meanwhile,
   waited for if it is not made yet), then commit the artifacts to the content-addressed artifact
   cache, make the recipe's runtime image when it declares one (rvport/engine/runtime.py; found again by its
   labels when unchanged, for a cached stage too), run its check (rvport/engine/check.py: the image as a
   service, a client against it, before and after a restart) and copy the artifacts into the output directory.

Nothing half-made is ever left in the output or the cache: every result is made in a temporary directory and
renamed into place.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import io
import os
import secrets
import shutil
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from rvport import manifest, proc
from rvport.catalogue.kinds import KINDS
from rvport.engine import (
    buildx,
    check,
    compcache,
    compcachedir,
    debpins,
    modes,
    parallel,
    render,
    runtime,
    smokereport,
)
from rvport.engine import tests as upstream
from rvport.engine.compcache import CacheUse, CompilerCache
from rvport.engine.images import BaseImage
from rvport.engine.prepare import Preparer
from rvport.engine.progress import Progress
from rvport.engine.stage import (
    LoadedToolchains,
    RunOptions,
    StageEnv,
    StageRecord,
    Toolchain,
    link_tree,
    stage_context,
    stage_tools,
)
from rvport.errors import BuildFailed, Problem, RvportError, SmokeFailed, VerifyFailed
from rvport.fileio import Ends, read_ends, read_json, read_regular
from rvport.plan.matrix import other_vlen_check
from rvport.plan.planner import RUST_REPORT, Plan, Stage
from rvport.sources.cache import sha256_file
from rvport.sources.tree import PreparedTree, prepare_tree
from rvport.target import PLATFORM as RISCV64
from rvport.verify import provenance
from rvport.verify.model import current_report

RUNNER_FORMAT = 2  # bump when the way stages are built changes, so old artifact cache entries are not reused
REPAIR_REPORT = ".rvport-repair"  # what wheel-repair.sh leaves beside the wheels, for the runner only
SMOKE_PASSED_LINES = 5  # the last lines of a smoke test's output kept in result.json
SMOKE_FAILED_LINES = 20  # ... and of a failing one's, also shown in the error
# The smoke stage's exports are read with bounds: a log from its end (what ended the run is there; the
# record says when bytes before it were left out) and its first bytes (the run without V's first line is the
# ISA its CPU showed); an exit status is a short word.
SMOKE_LOG_TAIL = 1 << 20
SMOKE_LOG_HEAD = 4096
SMOKE_STATUS_MAX = 4096
LOG_TAIL_BYTES = 1 << 20  # a failed stage's log is read from its end, this much at most (_tail)


def fresh_args(no_cache: bool) -> tuple[tuple[str, str], ...]:
    """The build arguments of a stage's build: with --no-cache a new RVPORT_FRESH, an ARG of the build step
    (resources/dockerfiles), so that step runs again. Not buildx's --no-cache, which on the engine's BuildKit
    (Docker 20.10's) also hands every cache mount over empty, the compiler cache's included."""
    return (("RVPORT_FRESH", secrets.token_hex(16)),) if no_cache else ()


@dataclass(frozen=True, kw_only=True)
class BuildOptions(RunOptions):
    smoke: bool = True
    tests: bool = True  # a recipe's upstream tests (`tests:`) after its smoke test; only with smoke
    verify: bool = True
    no_cache: bool = False  # compile afresh: skip the artifact cache, run each build step again (fresh_args)
    cache_to: Path | None = None  # buildx --cache-to type=local,dest=DIR,mode=max on the stage builds
    cache_from: Path | None = None  # buildx --cache-from type=local,src=DIR
    # the compiler cache: the engine's per toolchain, a host directory (--compiler-cache DIR), or off
    compiler_cache: CompilerCache = CompilerCache()
    # a build matrix's vector profile: the smoke test once more on a CPU of this other VLEN (plan/matrix.py)
    other_vlen: int | None = None


ARTIFACT_RECORD_SCHEMA = 1  # artifacts/<key>/manifest.json


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def artifact_record(
    *,
    recipe: str,
    key: str,
    verify: dict | None,
    smoke: dict | None,
    build_command: str | None,
    tests: dict | None = None,
    manylinux: list,
    rust: dict | None,
    files: Path,
) -> dict:
    """An artifact cache entry's record (artifacts/<key>/manifest.json; artifact-record.schema.json): what a
    cached stage reports again (verdicts, smoke test, build command, wheel repairs, Rust) and its files."""
    return {
        "schema": ARTIFACT_RECORD_SCHEMA,
        "kind": "rvport-artifact-record",
        "recipe": recipe,
        "key": key,
        "verify": verify,
        "smoke": smoke,
        **({"tests": tests} if tests is not None else {}),
        "build_command": build_command,
        "manylinux": manylinux,
        "rust": rust,
        "files": [_describe(p, files) for p in sorted(files.rglob("*")) if p.is_file()],
    }


def read_artifact_record(path: Path) -> dict | None:
    """An artifact cache entry's record as this rvport writes it, or None when there is none it reads (absent,
    unreadable, of another schema): the stage is then built again and the entry replaced. A record written
    before records carried `schema` has the fields of schema 1, its verify reports those of schema 1."""
    try:
        doc = read_json(path, what="artifact record")
    except RvportError:
        return None
    if not isinstance(doc, dict) or doc.get("schema", ARTIFACT_RECORD_SCHEMA) != ARTIFACT_RECORD_SCHEMA:
        return None
    return {**doc, "verify": _current_verify(doc.get("verify"))}


def _current_verify(verify: dict | None) -> dict | None:
    """A cached stage's verdicts (stages[].verify), their reports as this rvport writes them."""
    if not verify or not isinstance(verify.get("reports"), list):
        return verify
    return {**verify, "reports": [current_report(r) for r in verify["reports"]]}


def _matches(root: Path, pattern: str) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and fnmatch.fnmatch(p.name, pattern))


def _describe(path: Path, root: Path) -> dict:
    return {"path": str(path.relative_to(root)), "size": path.stat().st_size, "sha256": sha256_file(path)}


def take_repair_report(files: Path) -> list[dict]:
    """The wheel repair's report (rvport/resources/scripts/wheel-repair.sh), taken out of the artifacts: per
    wheel, the tag it carries now, the libraries grafted into it, and what auditwheel said."""
    report = files / REPAIR_REPORT
    if not report.is_dir():
        return []
    logs = {
        p.name.removesuffix(".log"): p.read_text(errors="replace").splitlines() for p in report.glob("*.log")
    }
    shutil.rmtree(report)
    out = []
    for built, lines in sorted(logs.items()):
        repaired = "not repaired" not in lines
        final = next(
            (
                w
                for w in sorted(files.rglob("*.whl"))
                if repaired and w.name != built and w.name.split("-")[:2] == built.split("-")[:2]
            ),
            None,
        )
        wheel = final or files / built
        platform = wheel.name.removesuffix(".whl").rsplit("-", 1)[-1]
        grafted: list[str] = []
        if final is not None:
            with zipfile.ZipFile(final) as z:
                grafted = sorted(n for n in z.namelist() if ".libs/" in n and not n.endswith("/"))
        out.append(
            {
                "built": built,
                "wheel": wheel.name,
                "repaired": final is not None,
                "platform": platform,
                "grafted": grafted,
                "auditwheel": [ln for ln in lines if ln.strip()][-8:],
            }
        )
        if final is not None and (files / built).exists():
            (files / built).unlink()
    return out


def take_rust_report(files: Path) -> dict | None:
    """The Rust a stage used (planner.RUST_RECORD), taken out of the artifacts: {"rustc", "cargo", "host"}."""
    report = files / RUST_REPORT
    if not report.is_file():
        return None
    out = {}
    for line in report.read_text(errors="replace").splitlines():
        name, sep, value = line.partition("=")
        if sep and name in ("rustc", "cargo", "host") and value.strip():
            out[name] = value.strip()
    report.unlink()
    return out


def repair_disagreements(repairs: list[dict], verify: dict | None) -> list[str]:
    """A repaired wheel must carry the tag rvport verify computes from its ELF files
    (rvport.verify.manylinux)."""
    computed = {
        Path(a["path"]).name: (a.get("wheel") or {}).get("manylinux")
        for report in (verify or {}).get("reports", [])
        for a in report.get("artifacts", [])
    }
    out = []
    for r in repairs:
        if r["repaired"] and r["wheel"] in computed and computed[r["wheel"]] not in r["platform"].split("."):
            out.append(
                f"{r['wheel']}: auditwheel tagged {r['platform']}, rvport computes {computed[r['wheel']]}"
            )
    return out


class Runner:
    def __init__(self, plan: Plan, opts: BuildOptions, rep: Progress):
        self.plan, self.opts, self.rep = plan, opts, rep
        self.profile = plan.request.profile
        self.cache_root = opts.fetch.cache.root
        self.logs = opts.output / "logs"
        self.records = [StageRecord(stage=s) for s in plan.stages]
        self.bases: dict[str, BaseImage] = {}
        self._bases = opts.bases(self.bases)
        self._toolchains = LoadedToolchains(opts.fetch)
        self.stage_outputs: dict[str, Path] = {}
        self.ahead: dict | None = None  # result.json's images_ahead
        self._trees: dict[str, PreparedTree] = {}  # every stage's source tree, prepared first
        self._test_wheels: dict[str, dict[str, Path]] = {}  # a stage's test wheels: file name -> cache entry
        # while the stages run: the image making (prepare.py) and its pool; the smoke images taken, by stage
        self._ahead: tuple[Preparer, parallel.SideBySide] | None = None
        self._smoke_images: dict[str, Toolchain] = {}

    # ------------------------------------------------------------------------------------------ helpers
    @contextlib.contextmanager
    def _scratch(self, *prefixes: str) -> Iterator[list[Path]]:
        """Fresh directories under the cache's tmp/, one per prefix, removed however the block ends."""
        root = self.cache_root / "tmp"
        root.mkdir(parents=True, exist_ok=True)
        dirs: list[Path] = []
        try:
            for prefix in prefixes:
                dirs.append(Path(tempfile.mkdtemp(prefix=prefix, dir=root)))
            yield dirs
        finally:
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)

    def _env(self, rec: StageRecord) -> StageEnv:
        """The stage environment the stage's mode works in (rvport/engine/stage.py)."""
        return StageEnv(
            stage=rec.stage,
            profile=self.profile,
            host=self.plan.host,
            record=rec,
            bases=self._bases,
            images=self._toolchains,
            progress=self.rep,
            log_path=self._log(rec),
            tmp_root=self.cache_root / "tmp",
            builder=self.opts.builder,
            compiler_cache=self.opts.compiler_cache,
        )

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
            failed = self._sources()
            if failed is None:
                failed = self._stages()
            if failed is not None:
                rec, error = failed
                rec.status = "failed"
                rec.error = error.render()
                rec.log_tail = getattr(error, "log_tail", None) or _tail(rec.log)
                self.rep.end(rec.stage.name, "failed")
                status, failing = "failed", rec.stage.name
        except KeyboardInterrupt:
            status = "interrupted"
            failing = next((r.stage.name for r in self.records if r.status == "interrupted"), None)
            self._write_result(started, status, failing)
            raise
        # result.json and provenance.json of a finished run are written whole and together: a Ctrl-C now is
        # raised once both are (the CLI then shows them and says "interrupted"), never between them
        with proc.uninterruptible():
            doc = self._write_result(started, status, failing)
        if error is not None:
            raise error
        return doc

    def _sources(self) -> tuple[StageRecord, RvportError] | None:
        """Every stage's verified source tree, before any image is made: a source that cannot be had (offline,
        a wrong digest) fails its stage at once, not after the minutes the images take."""
        for rec in self.records:
            env = self._env(rec)
            self.rep.step(rec.stage.name, "fetching and preparing sources")
            try:
                with env.timer("fetch"):
                    # pinned Debian packages first: in the signed index, or nothing is fetched or built
                    rec.debian_pins = debpins.check_recipe_pins(
                        rec.stage.recipe, self.opts.fetch, allow_expired=self.opts.allow_expired_release
                    )
                    tree = prepare_tree(rec.stage.recipe, self.opts.fetch)
            except KeyboardInterrupt:
                rec.status = "interrupted"
                raise
            except RvportError as e:
                self.rep.begin(rec.stage.name, f"{rec.stage.recipe.ref} [{rec.stage.mode.value}]")
                return rec, e
            self._trees[rec.stage.name] = tree
            rec.sources = [f.to_json() for f in tree.fetched]
            if rec.stage.tests is not None and self.opts.smoke and self.opts.tests:
                try:
                    with env.timer("fetch"):
                        self._test_wheels[rec.stage.name] = self._tests_ready(rec.stage, tree)
                except KeyboardInterrupt:
                    rec.status = "interrupted"
                    raise
                except RvportError as e:
                    self.rep.begin(rec.stage.name, f"{rec.stage.recipe.ref} [{rec.stage.mode.value}]")
                    return rec, e
        return None

    def _tests_ready(self, st: Stage, tree: PreparedTree) -> dict[str, Path]:
        """Before any image: the planned test files are in the stage's source tree (missing ones named,
        exit 3), and the pinned test wheels are fetched and checked (exit 4 on a wrong sha256)."""
        from rvport.catalogue.model import TestWheel
        from rvport.sources import fetch_sources

        assert st.tests is not None
        local = next((s.local for s in st.recipe.sources if s.local is not None and s.dest is None), None)
        where = f"the local tree {local.path}" if local else f"the prepared tree {tree.path}"
        upstream.check_files(st.recipe.ref, st.tests, tree.path, where)
        wheels = [TestWheel(file=w["file"], sha256=w["sha256"]) for w in st.tests["wheels"]]
        got = fetch_sources([w.source() for w in wheels], self.opts.fetch)
        return {w.file: f.path for w, f in zip(wheels, got, strict=True)}

    def _upstream_tests(self, env: StageEnv, files: Path, image: str) -> None:
        """The recipe's upstream tests (rvport/engine/tests.py) in a build of their own FROM the smoke image,
        no network, the profile's QEMU CPU; the record (stages[].tests) is made only from a finished run, and
        a failure raises UpstreamTestsFailed (exit 7)."""
        st = env.stage
        assert st.tests is not None
        rendered = upstream.dockerfile(
            image=image, qemu_cpu=env.riscv64_env["QEMU_CPU"], profile=self.profile
        )
        wheels = self._test_wheels.get(st.name, {})
        with self._scratch(f"tests-{st.name}-", f"tests-out-{st.name}-") as (ctx, out):
            upstream.context(
                ctx,
                tree=self._trees[st.name].path,
                planned=st.tests,
                artifacts=files,
                deps={d: self.stage_outputs[d] for d in st.depends},
                wheels=wheels,
                dockerfile=rendered.text,
            )
            buildx.build(
                buildx.BuildSpec(
                    context=ctx,
                    dockerfile=ctx / "Dockerfile",
                    platform=RISCV64,
                    output_dir=out,
                    network="none",
                    builder=self.opts.builder,
                    no_cache=True,
                ),
                log_path=env.log_path,
                on_line=env.line,
                on_phase=env.phase,
            )
            made = upstream.record(st.recipe.ref, out, st.tests, sorted(wheels))
        env.record.tests = made
        if made["status"] != "passed":
            raise upstream.failure(st.recipe.ref, made, env.log_path)

    def _stages(self) -> tuple[StageRecord, RvportError] | None:
        """Every stage's images made side by side (rvport/engine/prepare.py), and each stage built as soon as
        its own build images are made, in plan order (its smoke test takes its smoke image, `_smoke_image`);
        the first stage that failed, with its error. Leaving early (a failure, an interrupt) stops the image
        making still going on. How long the image making took, from its start to its last task's end, each
        stage's build images and its smoke image go to result.json (images_ahead; the bases' own times are in
        base_images). A smoke image no stage took (a cached stage's, without a runtime check) is still waited
        for when the stages are done, as `rvport prepare` makes it; nothing needed it, so its failure fails no
        stage (its own row says so)."""
        prep = Preparer(
            self.plan, self.opts, self.rep, smoke=self.opts.smoke, bases=self.bases, for_build=True
        )
        try:
            with parallel.SideBySide(prep.workers) as pool:
                prep.start(pool)
                self._ahead = (prep, pool)
                for rec in self.records:
                    self.rep.begin(rec.stage.name, f"{rec.stage.recipe.ref} [{rec.stage.mode.value}]")
                    try:
                        self.rep.step(rec.stage.name, "waiting for its images")
                        waited = time.monotonic()
                        error = prep.wait(pool, rec.stage.name)
                        # the part of the run it waited for its build images (its smoke image: smoke_image)
                        rec.timings["images"] = time.monotonic() - waited
                        if error is not None:  # as if the stage had failed to make them now
                            raise error
                        self._run_stage(rec)
                    except KeyboardInterrupt:
                        rec.status = "interrupted"
                        self.rep.end(rec.stage.name, "interrupted")
                        raise
                    except RvportError as e:
                        pool.stop()  # the later stages' images are not waited for
                        return rec, e
                    self.rep.end(rec.stage.name, rec.status)
        finally:
            self._ahead = None
            self.ahead = {
                "duration_s": prep.span(),
                "workers": prep.workers,
                "stages": dict(prep.timings),
                "smoke": dict(prep.smoke_timings),
            }
        return None

    def _write_result(self, started: float, status: str, failing: str | None) -> dict:
        doc = {
            "schema": manifest.RESULT_SCHEMA,
            "kind": "rvport-result",
            "status": status,
            "failing_stage": failing,
            "tag": self.plan.request.tag,
            "profile": self.profile.to_json(),
            "host": self.plan.host.to_json(),
            "builder": self.opts.builder,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "duration_s": round(time.time() - started, 2),
            "base_images": {k: b.to_json() for k, b in self.bases.items()},
            "images_ahead": self.ahead,
            "stages": [r.to_json() for r in self.records],
            "artifacts": [dict(a, recipe=r.stage.name) for r in self.records for a in r.artifacts],
            **({"pythons": list(self.plan.request.pythons)} if self.plan.request.pythons else {}),
        }
        manifest.write(self.opts.output / "result.json", doc)
        provenance.write_beside(
            self.opts.output,
            doc,
            self.plan.to_json(),  # SLSA v1, beside it (docs/verify.md)
            buildx.builder_info(self.opts.builder) if status == "ok" else None,
        )
        return doc

    def _run_stage(self, rec: StageRecord) -> None:
        st = rec.stage
        name = st.name
        env = self._env(rec)

        tree = self._trees[name]
        setup = modes.setup(env)  # the images (made ahead) and the Dockerfile, as `rvport prepare` makes them
        base, rendered = setup.base, setup.dockerfile
        script = render.build_script(st.commands)
        dep_keys = [self._record(d).key or "" for d in st.depends]
        rec.key = _key(
            f"runner-{RUNNER_FORMAT}",
            st.key,
            tree.key,
            rec.images["toolchain"],
            rendered.sha256,
            script,
            hashlib.sha256(compcache.script().encode()).hexdigest(),
            *dep_keys,
            str(self.opts.smoke),
            str(self.opts.tests),
            str(self.opts.verify),
            *((f"other-vlen-{self._other_vlen(st)['vlen']}",) if self._other_vlen(st) else ()),
        )
        store = self.cache_root / "artifacts" / rec.key
        meta = None if self.opts.no_cache else read_artifact_record(store / "manifest.json")
        if meta is not None:
            self.rep.step(name, "unchanged inputs: reusing verified artifacts")
            rec.compiler_cache = {
                "tool": compcache.TOOL,
                "use": self.opts.compiler_cache.use.value,
                "status": "not used: the stage's artifacts were cached",
            }
            rec.verify, rec.smoke, rec.rust = meta.get("verify"), meta.get("smoke"), meta.get("rust")
            rec.tests = meta.get("tests")
            rec.build_command = meta.get("build_command")
            rec.manylinux = meta.get("manylinux") or []
            rec.status = "cached"
        else:
            self._build_into_store(env, tree.path, rendered, script, store)
            rec.status = "ok"
        if st.runtime is not None:  # after the smoke test (or verify): a cached stage ensures its image too
            with env.timer("runtime"):
                made = runtime.make(env, base, store / "files", rec.key)
            rec.runtime = made.to_json()
            if st.runtime.spec.check is not None:
                self._check(env, made, store / "files")
        self._export(rec, store)

    def _check(self, env: StageEnv, made: runtime.MadeImage, files: Path) -> None:
        """The runtime check (rvport/engine/check.py) into stages[].runtime.check; run when the image was made
        or the stage built now, else a kept passing result of the same images is reused; --no-smoke skips it.
        A failing check fails the stage (exit 7, as a failing smoke test)."""
        rec = env.record
        assert rec.runtime is not None
        if not self.opts.smoke:
            self.rep.step(env.stage.name, "runtime check skipped (--no-smoke)")
            rec.runtime["check"] = {"status": "skipped", "rounds": []}
            return
        client = self._smoke_image(env)  # the client runs in it
        with env.timer("check"):
            rec.runtime["check"] = check.ensure(
                env,
                made,
                client,
                files,
                self.cache_root / "checks",
                fresh=made.made or rec.status != "cached",
            )
        if rec.runtime["check"]["status"] != "passed":
            raise check.failure(env.stage.recipe.ref, rec.runtime["check"], env.log_path)

    def _smoke_image(self, env: StageEnv) -> Toolchain:
        """The stage's smoke image (also a runtime check's client), made beside the stage's build by the
        image making's smoke task (prepare.py): taken from it, waited for when not made yet (timings
        .smoke_image), never made a second time. The first time, its log (Preparer.smoke_log) is added to the
        stage's at this point, as if the stage had made it now; so is its failure: the error that stopped it
        fails the stage here."""
        name = env.stage.name
        if name in self._smoke_images:
            return self._smoke_images[name]
        assert self._ahead is not None, "the stages run inside _stages"
        prep, pool = self._ahead
        if not pool.done(("smoke", name)):
            self.rep.step(name, "waiting for its smoke image")
        with env.timer("smoke_image"):
            image = prep.smoke_image(pool, name)
        _append_log(prep.smoke_log(name), env.log_path, f"smoke image for {env.stage.recipe.ref}")
        if isinstance(image, RvportError):
            raise image
        env.step(f"smoke image {image.tag}")
        self._smoke_images[name] = image
        return image

    def _record(self, name: str) -> StageRecord:
        return next(r for r in self.records if r.stage.name == name)

    def _build_into_store(
        self,
        env: StageEnv,
        tree: Path,
        rendered: render.Rendered,
        script: str,
        store: Path,
    ) -> None:
        rec, st, log, on_line = env.record, env.stage, env.log_path, env.line
        with self._scratch(f"ctx-{st.name}-", f"out-{st.name}-") as (ctx, out):
            self.rep.step(st.name, "staging the build context")
            stage_context(
                ctx,
                tree,
                rendered,
                script,
                {d: self.stage_outputs[d] for d in st.depends},
                stage_tools(st, self.opts.fetch),
            )
            imported = self._import_compiler_cache(env, ctx)
            self.rep.step(st.name, "building (no network)")
            spec = buildx.BuildSpec(
                context=ctx,
                dockerfile=ctx / "Dockerfile",
                platform=st.platform,
                output_dir=out / "files",
                network="none",
                builder=self.opts.builder,
                cache_to=self.opts.cache_to,
                cache_from=self.opts.cache_from,
                build_args=fresh_args(self.opts.no_cache),
            )
            rec.build_command = buildx.quote(spec.argv())
            with env.timer("build"):
                buildx.build(spec, log_path=log, on_line=on_line, on_phase=env.phase)
            files = out / "files"
            self._export_compiler_cache(env, files, imported)
            rec.manylinux = take_repair_report(files)
            rec.rust = take_rust_report(files)
            missing = [o.glob for o in st.recipe.outputs if not _matches(files, o.glob)]
            if missing:
                raise BuildFailed(
                    f"{st.recipe.ref}: the build left no {', '.join(missing)} in $RVPORT_OUT",
                    hint=f"check the build commands in {st.recipe.file}; full log: {log}",
                )
            if self.opts.verify:
                self.rep.step(st.name, "verifying artifacts")
                with env.timer("verify"):
                    rec.verify, failures = self._verify(st, files)
                if failures:  # after the record has the verdicts: result.json keeps them
                    raise VerifyFailed(
                        f"{st.recipe.ref}: artifacts failed verification for profile {st.profile.name} "
                        f"(-march={st.profile.march})",
                        hint="the verdicts are in result.json (stages[].verify)",
                        problems=[Problem(message=f) for f in failures[:10]],
                    )
                wrong = repair_disagreements(rec.manylinux, rec.verify)
                if wrong:
                    raise VerifyFailed(
                        f"{st.recipe.ref}: auditwheel's tag and the tag rvport computes from the ELF "
                        "files disagree",
                        problems=[Problem(message=w) for w in wrong],
                        hint="see stages[].manylinux and stages[].verify in result.json",
                    )
            if self.opts.smoke and st.recipe.smoke:
                image = self._smoke_image(env).tag  # made meanwhile; its failure fails the stage here
                with env.timer("smoke"):
                    self.rep.step(st.name, "smoke test in a clean riscv64 container")
                    self._smoke(env, files, image)  # sets rec.smoke; a failing test raises SmokeFailed
                check = self._other_vlen(st)
                if check is not None:
                    with env.timer("smoke_other_vlen"):
                        self.rep.step(st.name, f"smoke test on a CPU of VLEN {check['vlen']}")
                        self._smoke_other_vlen(env, files, image, check)  # smoke.other_vlen
                if st.tests is not None and self.opts.tests:
                    with env.timer("tests"):
                        self.rep.step(st.name, "upstream tests in a clean riscv64 container")
                        self._upstream_tests(env, files, image)  # sets rec.tests; failing: exit 7
            meta = artifact_record(
                recipe=st.recipe.ref,
                key=rec.key,
                verify=rec.verify,
                smoke=rec.smoke,
                tests=rec.tests,
                build_command=rec.build_command,
                manylinux=rec.manylinux,
                rust=rec.rust,
                files=files,
            )
            (out / "manifest.json").write_text(manifest.dumps(meta))
            store.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(store, ignore_errors=True)
            os.replace(out, store)  # atomic: the store entry appears complete or not at all

    def _import_compiler_cache(self, env: StageEnv, ctx: Path) -> dict | None:
        """With --compiler-cache DIR: the stage's toolchain's cache imported into its build context
        (compcachedir); what is there and cannot be used is ignored with a line, and the build starts cold."""
        cache = self.opts.compiler_cache
        if cache.use is not CacheUse.DIR:
            return None
        assert cache.directory is not None and env.ccache_id is not None
        env.step(f"importing the compiler cache {cache.directory}")
        imported = compcachedir.import_into(
            ctx / compcache.IMPORT_DIR, cache.directory, env.ccache_id, max_size=cache.max_size
        )
        if imported["status"] == "ignored":
            env.line(f"compiler cache: {imported['reason']}: ignored, the build starts cold")
        return imported

    def _export_compiler_cache(self, env: StageEnv, files: Path, imported: dict | None) -> None:
        """The stage's compiler cache report taken out of its artifacts into stages[].compiler_cache; with
        --compiler-cache DIR the cache the build left made the directory's entry (atomically: a failure keeps
        the previous one and is a line, not a failed stage)."""
        cache = self.opts.compiler_cache
        rec = env.record
        rec.compiler_cache, exported = compcache.take_report(files, cache)
        rec.compiler_cache["id"] = env.ccache_id
        if imported is not None:
            rec.compiler_cache["import"] = imported
        if cache.use is CacheUse.DIR and env.ccache_id is not None:
            assert cache.directory is not None
            if exported is None:
                done = {"status": "failed", "reason": "the build exported no cache", "files": 0, "bytes": 0}
            else:
                done = compcachedir.export(
                    exported,
                    cache.directory,
                    env.ccache_id,
                    max_size=cache.max_size,
                    imported=(imported or {}).get("generation"),
                )
                shutil.rmtree(exported, ignore_errors=True)
            rec.compiler_cache["export"] = done
            if done["status"] != "exported":
                env.line(f"compiler cache: not exported to {cache.directory}: {done['reason']}")
        env.line(f"compiler cache: {compcache.rate(rec.compiler_cache)}")

    def _verify(self, st: Stage, files: Path) -> tuple[dict, list[str]]:
        """Every expected output verified at its ISA level: the verdicts (stages[].verify, `ok` false when any
        artifact failed) and each failed artifact's reasons."""
        from rvport.verify import verify_paths

        reports, failures = [], []
        for o in st.recipe.outputs:
            # the stage's profile: what its compiler was given (rvv256-bf16's zfbfmin where GCC accepts it)
            report = verify_paths(
                _matches(files, o.glob), st.profile, isa=o.isa, exports=o.exports, vlen_exact=o.vlen_exact
            )
            doc = report.to_json()
            for a in doc["artifacts"]:  # paths relative to the stage's output, not a temporary directory
                a["path"] = str(Path(a["path"]).relative_to(files))
            reports.append(doc)
            failures += [
                f"{Path(a.path).relative_to(files)}: {r}" for a in report.failed for r in a.all_reasons()
            ]
        return {"ok": not failures, "reports": reports}, failures

    def _smoke(self, env: StageEnv, files: Path, image: str) -> None:
        """The smoke test, in `image` (modes.smoke_image) under QEMU, with no network; its output and exit
        status go to the record (stages[].smoke), and a non-zero status fails the stage with its last
        lines."""
        st = env.stage
        install, run = render.smoke_commands(st.recipe.kind, st.recipe.smoke or "")
        without_vector = st.smoke_without_vector
        rendered = render.smoke_dockerfile(
            image=image,
            qemu_cpu=env.riscv64_env["QEMU_CPU"],
            profile=self.profile,
            install=install,
            run=run,
            without_vector_cpu=without_vector["cpu"] if without_vector else None,
        )
        with self._smoke_run(env, files, rendered.text, "smoke") as (out, installed):
            env.record.smoke = smoke_record(st.recipe.ref, out, without_vector)
            if installed and KINDS[st.recipe.kind].installs_wheels:
                env.record.smoke["deps"] = installed
            if env.record.smoke["status"] != "passed":
                raise smoke_failure(st.recipe.ref, env.record.smoke, env.log_path)
            if (env.record.smoke.get("without_vector") or {}).get("status") == "failed":
                raise without_vector_failure(st.recipe.ref, env.record.smoke["without_vector"], env.log_path)

    @contextlib.contextmanager
    def _smoke_run(
        self, env: StageEnv, files: Path, dockerfile: str, prefix: str
    ) -> Iterator[tuple[Path, list[str]]]:
        """One run of the stage's smoke test: its context (the artifacts, the dependencies' wheels, the
        recipe's script, rvport's smoke scripts and `dockerfile`) built with no network and no cache; yields
        (its exported output directory, the dependencies installed), both gone when the block ends."""
        st = env.stage
        with self._scratch(f"{prefix}-{st.name}-", f"{prefix}-out-{st.name}-") as (ctx, out):
            link_tree(files, ctx / "artifacts")
            installed = smoke_deps(ctx / "deps", {d: self.stage_outputs[d] for d in st.depends})
            (ctx / "rvport-smoke").write_text(st.recipe.smoke or "")
            for name, text in render.smoke_scripts().items():  # what the Dockerfile copies in
                (ctx / name).write_text(text)
            (ctx / "Dockerfile").write_text(dockerfile)
            buildx.build(
                buildx.BuildSpec(
                    context=ctx,
                    dockerfile=ctx / "Dockerfile",
                    platform=RISCV64,
                    output_dir=out,
                    network="none",
                    builder=self.opts.builder,
                    no_cache=True,
                ),
                log_path=env.log_path,
                on_line=env.line,
                on_phase=env.phase,
            )
            yield out, installed

    def _other_vlen(self, st: Stage) -> dict | None:
        """The smoke test's run at another VLEN this stage gets (a build matrix's vector profile with a smoke
        test: BuildOptions.other_vlen), as planned (plan/matrix.py); None when it gets none."""
        asked = self.opts.other_vlen is not None and self.opts.smoke and bool(st.recipe.smoke)
        if not asked or self.profile.vlen <= 0:
            return None
        exact = any(o.vlen_exact for o in st.recipe.outputs)
        return other_vlen_check(self.profile, int(self.opts.other_vlen or 0), exact=exact)

    def _smoke_other_vlen(self, env: StageEnv, files: Path, image: str, check: dict) -> None:
        """The smoke test again, in a clean container of the smoke image, on the profile's CPU with the other
        VLEN (RVPORT_VLEN still the stage's); its record, stages[].smoke.other_vlen (other_vlen_record). A
        wheel that does not assume its VLEN and fails there fails the stage (exit 7); a VLEN-exact one that
        passes there is recorded as a finding."""
        st = env.stage
        install, run = render.smoke_commands(st.recipe.kind, st.recipe.smoke or "")
        rendered = render.smoke_dockerfile(
            image=image, qemu_cpu=str(check["cpu"]), profile=self.profile, install=install, run=run
        )
        with self._smoke_run(env, files, rendered.text, "smoke-vlen") as (out, _installed):
            record = other_vlen_record(st.recipe.ref, out, check)
        assert env.record.smoke is not None
        env.record.smoke["other_vlen"] = record
        if record["status"] == "failed":
            err = SmokeFailed(
                f"{st.recipe.ref}: the smoke test on a CPU of VLEN {check['vlen']} (QEMU_CPU {check['cpu']}) "
                f"must pass, since it is above the profile's VLEN and no output of the recipe says it "
                f"assumes its VLEN (`vlen: exact`), but it ended with {record['observed']}; "
                f"{_last_lines(record)}",
                detail=_shown(record),
                hint=f"stages[].smoke.other_vlen in result.json has this run; the full log is {env.log_path}",
            )
            err.log_tail = list(record["output"])
            raise err

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
        rec.artifacts = [
            _describe(p, self.opts.output / "artifacts") for p in sorted(final.rglob("*")) if p.is_file()
        ]
        self.stage_outputs[rec.stage.name] = final


def _append_log(src: Path, dest: Path, what: str) -> None:
    """Add the log `src` (of work done beside the stage: its smoke image) to the stage's log `dest`, in
    blocks, between lines that say what it is; nothing when there is none (the image was found made)."""
    try:
        f = open(src, "rb")  # noqa: SIM115 - closed below; absent: nothing to add
    except FileNotFoundError:
        return
    with f, open(dest, "ab") as out:
        out.write(f"--- {what}: made beside the stage, logged in {src}\n".encode())
        shutil.copyfileobj(f, out)
        out.write(f"--- end of {what}\n".encode())


def smoke_deps(dest: Path, deps: Mapping[str, Path]) -> list[str]:
    """The smoke context's deps/<stage>/: the wheels among each dependency stage's artifacts, which the smoke
    test installs beside the stage's own (a wheel that imports its dependency at run time, as xgrammar imports
    tvm_ffi, cannot be tested without it). Other artifacts (a static library) stay out. Returns the wheels'
    names, sorted."""
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for dep, path in sorted(deps.items()):
        for whl in sorted(p for p in Path(path).rglob("*.whl") if p.is_file()):
            (dest / dep).mkdir(exist_ok=True)
            shutil.copy2(whl, dest / dep / whl.name)
            names.append(whl.name)
    return sorted(names)


def smoke_record(ref: str, out: Path, without_vector: Mapping[str, str] | None = None) -> dict:
    """The smoke stage's exported log and exit status (smoke.Dockerfile) -> the record of stages[].smoke:
    {"status": "passed", "output": [...]} or {"status": "failed", "exit_status": N, "output": [...]}; with
    `smoke: without_vector:` (the planner's {"cpu", "expected"}) also the second run's check, `without_vector`
    (without_vector_record)."""
    record = _smoke_main_record(ref, out)
    if without_vector:
        record["without_vector"] = without_vector_record(ref, out, without_vector)
    return record


def _exported_run(ref: str, out: Path, stem: str, *, head: int = 0) -> tuple[str, list[str], dict]:
    """A run the smoke stage exported (smoke.Dockerfile): /STEM.status and /STEM.log -> (status, lines, and
    what the record says of a log over the cap: {"truncated": True, "log_bytes": N}, else {}). The log is
    read from its end, SMOKE_LOG_TAIL bytes (and its first `head` bytes); neither file may be a link."""
    status_path, log_path = out / f"{stem}.status", out / f"{stem}.log"
    for path in (status_path, log_path):
        if not path.is_symlink() and not path.exists():
            raise BuildFailed(
                f"{ref}: the smoke stage exported no {path.name}",
                hint="a smoke.Dockerfile from RVPORT_DOCKERFILES older than this rvport? It must export "
                f"/{stem}.log and /{stem}.status",
            )
    bounds = {
        "what": f"{ref}'s smoke export",
        "error": BuildFailed,
        "hint": "smoke.Dockerfile writes it as a regular file; the stage's full log is in OUTPUT/logs/",
        "follow": False,
    }
    status = read_regular(status_path, limit=SMOKE_STATUS_MAX, **bounds)  # type: ignore[arg-type]
    log = read_ends(log_path, head=head, tail=SMOKE_LOG_TAIL, **bounds)  # type: ignore[arg-type]
    cut = {"truncated": True, "log_bytes": log.size} if log.truncated else {}
    return status.decode("utf-8", errors="replace").strip(), _log_lines(log), cut


def _log_lines(log: Ends) -> list[str]:
    """The lines of a log read by read_ends; where bytes were left out, the lines cut by the gap too."""

    def text(data: bytes) -> str:
        return data.decode("utf-8", errors="replace")

    if not log.truncated:
        kept = text(log.head).strip().splitlines()
    else:
        first = text(log.head).lstrip()
        kept = first.splitlines()
        if kept and not first.endswith(("\n", "\r")):
            kept.pop()  # it runs on into the bytes left out
        kept += text(log.tail).rstrip().splitlines()[1:]  # the tail's first line began in them
    return [line.rstrip() for line in kept]


def _smoke_main_record(ref: str, out: Path) -> dict:
    status_text, lines, cut = _exported_run(ref, out, "rvport-smoke")
    checks, problem = _smoke_checks(ref, out)
    with_checks = {"checks": checks} if checks else {}
    if status_text == "0" and problem is None:
        return {"status": "passed", "output": lines[-SMOKE_PASSED_LINES:], **with_checks, **cut}
    try:
        status = int(status_text)
    except ValueError:
        status = -1
    failed = {"status": "failed", "exit_status": status, "output": lines[-SMOKE_FAILED_LINES:]}
    return {**failed, **with_checks, **({"problem": problem} if problem else {}), **cut}


def _smoke_checks(ref: str, out: Path) -> tuple[list[dict], str | None]:
    """The checks of the smoke test's report (smokereport.py), and what fails the test in it: a report that
    is not of the report's shape, or a check that did not pass. No report exported (a smoke.Dockerfile of
    another rvport) is no checks."""
    path = out / smokereport.REPORT_FILE
    if not path.is_symlink() and not path.exists():
        return [], None
    data = read_regular(
        path,
        limit=smokereport.REPORT_MAX,
        what=f"{ref}'s smoke report",
        error=BuildFailed,
        hint="the smoke test writes at most one JSON object to $RVPORT_SMOKE_REPORT (docs/recipes.md)",
        follow=False,
    )
    try:
        checks = smokereport.parse(data)
    except ValueError as e:
        return [], f"its report ($RVPORT_SMOKE_REPORT) was refused: {e}"
    bad = smokereport.failed(checks)
    return checks, (f"its report says these checks failed: {', '.join(bad)}" if bad else None)


SIGILL_STATUS = 128 + 4  # a shell's exit status for a process killed by SIGILL (QEMU kills itself with it)
_NOT_JUDGED = {
    "not-run": ("not run", "the smoke test failed, so it was not run again without V"),
    "not-asked": ("not run", "the smoke stage did not run it (a smoke.Dockerfile of another rvport?)"),
    "not-emulated": (
        "skipped",
        "the CPU without V still shows V in /proc/cpuinfo: the smoke container runs natively on riscv64, "
        "where QEMU_CPU takes nothing away",
    ),
}


def without_vector_record(ref: str, out: Path, without_vector: Mapping[str, str]) -> dict:
    """The smoke test's second run on a QEMU CPU without V (smoke.Dockerfile) -> its record,
    stages[].smoke.without_vector: the CPU, the outcome expected (`sigill` or `pass`,
    planner.smoke_without_vector) and observed (`sigill`, `pass` or `exit N`), its exit status, the ISA that
    CPU showed, and `status`: passed when they agree, failed when not, skipped or not run (with a reason)
    when it could not be judged."""
    status_text, lines, cut = _exported_run(ref, out, "rvport-smoke-novector", head=SMOKE_LOG_HEAD)
    isa = lines[0].removeprefix("isa: ").strip() if lines and lines[0].startswith("isa: ") else None
    record: dict = {**without_vector, "isa": isa, "exit_status": None, "observed": None, **cut}
    if status_text in _NOT_JUDGED:
        status, reason = _NOT_JUDGED[status_text]
        return {**record, "status": status, "reason": reason, "output": lines[-SMOKE_PASSED_LINES:]}
    try:
        code = int(status_text)
    except ValueError:
        code = -1
    observed = {0: "pass", SIGILL_STATUS: "sigill"}.get(code, f"exit {code}")
    ok = observed == without_vector["expected"]
    return {
        **record,
        "exit_status": code,
        "observed": observed,
        "status": "passed" if ok else "failed",
        "output": lines[-(SMOKE_PASSED_LINES if ok else SMOKE_FAILED_LINES) :],
    }


def other_vlen_record(ref: str, out: Path, check: Mapping) -> dict:
    """The smoke test's run on a CPU of another VLEN (_smoke_other_vlen) -> stages[].smoke.other_vlen: the
    VLEN, the CPU, the outcome expected (`pass`; `refused` for a VLEN-exact wheel; `any` below the profile's
    VLEN for one that is not) and observed (`pass`, `sigill`, `exit N`), and `status`: passed when they
    agree, failed when a wheel expected to pass did not, `finding` when a VLEN-exact wheel passed there."""
    status_text, lines, cut = _exported_run(ref, out, "rvport-smoke")
    try:
        code = int(status_text)
    except ValueError:
        code = -1
    observed = {0: "pass", SIGILL_STATUS: "sigill"}.get(code, f"exit {code}")
    if check["expected"] == "any":
        status = "passed"
    elif check["expected"] == "pass":
        status = "passed" if observed == "pass" else "failed"
    else:
        status = "finding" if observed == "pass" else "passed"
    keep = SMOKE_PASSED_LINES if status == "passed" else SMOKE_FAILED_LINES
    return {
        **check,
        "observed": observed,
        "exit_status": code,
        "status": status,
        "output": lines[-keep:],
        **cut,
    }


def without_vector_failure(ref: str, record: dict, log: Path) -> SmokeFailed:
    """The error (exit 7, as a failed smoke test) of a run without V whose outcome is not the expected one."""
    expected, observed = record["expected"], record["observed"]
    if expected == "sigill" and observed == "pass":
        why = (
            "it passed: the kernels ran without the vector extension, so the vector code is not what runs "
            "(a silent scalar fallback, or no vector code at all)"
        )
    elif expected == "sigill":
        why = f"it ended with {observed} instead: not the illegal instruction a vector kernel meets there"
    elif observed == "sigill":
        why = "it died with SIGILL: the artifact needs V where its recipe says it runs without"
    else:
        why = f"it ended with {observed}"
    err = SmokeFailed(
        f"{ref}: the smoke test again on a CPU without V (QEMU_CPU {record['cpu']}) must "
        f"{'die with SIGILL' if expected == 'sigill' else 'pass'}, but {why}; {_last_lines(record)}",
        detail=_shown(record),
        hint=f"stages[].smoke.without_vector in result.json has this run; the full log is {log}",
    )
    err.log_tail = list(record["output"])
    return err


def _last_lines(record: dict) -> str:
    """ "its last lines:", the end of the message before its output (_shown); a log over the cap says so."""
    if record.get("truncated"):
        return (
            f"its last lines (its log is {record['log_bytes']} bytes: only the last {SMOKE_LOG_TAIL} were "
            "read):"
        )
    return "its last lines:"


def _shown(record: dict) -> list[str]:
    """The record's output, indented, as the error's detail lines."""
    return ["    " + line for line in record["output"]] or ["    (it printed nothing)"]


def smoke_failure(ref: str, record: dict, log: Path) -> SmokeFailed:
    """The error of a failed smoke test (exit 7): its exit status and last lines, in the message too."""
    why = f"exit status {record['exit_status']}"
    if record.get("problem"):  # its report refused, or a check in it failed (_smoke_checks)
        why = record["problem"] if record["exit_status"] == 0 else f"{why}; {record['problem']}"
    err = SmokeFailed(
        f"{ref}: the smoke test failed ({why}); {_last_lines(record)}",
        detail=_shown(record),
        hint=f"the artifacts were built and verified but not kept; stages[].smoke in result.json "
        f"has this output, the full log is {log}",
    )
    err.log_tail = list(record["output"])
    return err


def _tail(log: str | None, n: int = 30) -> list[str]:
    """A failed stage's last n log lines (result.json's log_tail), as a text file's lines (universal
    newlines, bad UTF-8 replaced). Only the log's last LOG_TAIL_BYTES are read: a big build's log is hundreds
    of MB. When bytes before them were left out, the first line read began in them and is dropped (unless it
    is all there is: the end of one overlong line). A log that cannot be read has no tail: the stage's own
    error is what the run reports."""
    if not log or not Path(log).is_file():
        return []
    try:
        ends = read_ends(Path(log), head=0, tail=LOG_TAIL_BYTES, what="stage log", error=BuildFailed)
    except RvportError:
        return []
    lines = io.StringIO((ends.head + ends.tail).decode("utf-8", errors="replace"), newline=None).readlines()
    if ends.truncated:
        lines = lines[1:] or lines
    return [ln.rstrip("\n") for ln in lines[-n:]]
