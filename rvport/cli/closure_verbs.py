"""CLI commands for a recipe's runtime closure: `rvport lock` (resolve and write the lock), `rvport
wheelhouse` (every wheel of the lock, with hashes and the apt list) and `rvport serve-check` (the wheelhouse
installed offline in a riscv64 container, then the program generates and serves). Parse, call
rvport.closure.resolve, .wheelhouse and .servecheck, render. Registered in rvport/cli/app.py
(docs/closure.md)."""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from rvport.cli import ci, handoff, outputs, settings
from rvport.cli.console import ui
from rvport.cli.options import LockArgs, ServeCheckArgs, WheelhouseArgs
from rvport.safetext import one_line

if TYPE_CHECKING:
    from rvport.catalogue.model import Recipe
    from rvport.catalogue.recipes import Catalogue
    from rvport.sources import FetchOptions


def counts_table(summary: dict) -> Table:
    t = Table(title=f"closure of {summary['recipe']} {summary['version']} ({summary['abi']})")
    for col in ("origin", "distributions"):
        t.add_column(col, justify="right" if col == "distributions" else "left")
    for origin, n in summary["counts"].items():
        t.add_row(origin, str(n))
    t.add_row("total", str(summary["total"]))
    return t


@settings.command(
    settings.LOCK, short_help="Resolve a recipe's runtime closure for riscv64 and write its lock."
)
def lock(o: LockArgs) -> None:
    """Resolve a recipe's runtime closure for riscv64 and its base's Python, and write its lock.

    Every requirement, evaluated for riscv64 Linux and the base's CPython, becomes a recipe rvport builds, a
    Debian package of the base's suite at an exact version (its .deb's sha256 from the signed index), or a
    wheel from the package index by file name and sha256, as RECIPE.policy.yaml in rvport/resources/locks/
    says (docs/closure.md). The wheels are downloaded into the cache, checked by sha256, to read their
    requirements."""
    from rvport.catalogue import closure_lock
    from rvport.catalogue.recipes import load_catalogue
    from rvport.closure.resolve import default_output, generate

    cat = load_catalogue(list(o.recipes_dir))
    recipe = cat.resolve(o.recipe)
    fopts = handoff.fetch_options(o)
    u = ui()
    out = o.lock_file or default_output(recipe)
    if outputs.is_stdout(out):  # `--output -`: the lock on standard output, what people read on stderr
        _lock_to_stdout(cat, recipe, fopts, o)
        return
    outputs.check_lock_file(out)  # before any resolving: only a lock rvport wrote is replaced
    made = generate(
        cat,
        recipe,
        fopts,
        output=out,
        allow_expired=o.allow_expired_release,
        log=lambda m: u.err.print(one_line(m), markup=False, highlight=False),
    )
    u.console.print(counts_table(made.summary()), crop=False)
    u.console.print(f"wrote {one_line(out)} ({made.digest})", markup=False, soft_wrap=True)
    # a lock is used from the locks directory: the built-in one, or the directory RVPORT_LOCKS names
    where = out.absolute().parent
    if where != closure_lock.locks_dir().absolute():
        u.console.print(
            f"to use it: RVPORT_LOCKS={one_line(shlex.quote(str(where)))} rvport plan {recipe.ref} (plan, "
            "build, wheelhouse and serve-check read the lock from there instead of the built-in one)",
            markup=False,
        )


def _lock_to_stdout(cat: Catalogue, recipe: Recipe, fopts: FetchOptions, o: LockArgs) -> None:
    """The lock made in a scratch directory (written and read back whole, as into a file), then its text on
    standard output; the counts and the advice on stderr."""
    from rvport.catalogue.yamlsrc import MAX_BYTES
    from rvport.closure.resolve import default_output, generate
    from rvport.fileio import read_regular

    u = ui()
    with tempfile.TemporaryDirectory(prefix="rvport-lock-") as scratch:
        path = Path(scratch) / default_output(recipe).name
        made = generate(
            cat,
            recipe,
            fopts,
            output=path,
            allow_expired=o.allow_expired_release,
            log=lambda m: u.err.print(m, markup=False, highlight=False),
        )
        text = read_regular(path, what="closure lock", limit=MAX_BYTES).decode("utf-8")
    outputs.write_text(outputs.STDOUT_PATH, text)
    u.err.print(counts_table(made.summary()), crop=False)
    u.err.print(
        f"wrote the lock to standard output ({made.digest}); to use it, save it as {path.name} in a "
        "directory and set RVPORT_LOCKS to that directory",
        markup=False,
    )


@settings.command(
    settings.WHEELHOUSE, short_help="Every wheel of a recipe's closure lock, with hashes, for offline use."
)
def wheelhouse(o: WheelhouseArgs) -> None:
    """Put every wheel of a recipe's closure lock into DIR, with DIR/requirements.txt (each wheel by sha256)
    and DIR/debian-packages.txt (what apt installs first), for an offline install on riscv64.

    The lock is checked first (its digest, its pins against each other and against Debian's signed index
    now); the index's wheels come through the download cache, checked by sha256; the wheels rvport builds
    come from --artifacts. Every wheel's requirements must be met by the lock, and every wheel must pass
    `rvport verify` for --profile. DIR is written whole at the end, or not at all (docs/closure.md)."""
    from rvport.catalogue.bases import load_base
    from rvport.catalogue.closure_lock import find_lock, lock_path
    from rvport.catalogue.profiles import get_profile
    from rvport.catalogue.recipes import load_catalogue
    from rvport.closure import inductor
    from rvport.closure import wheelhouse as wh
    from rvport.errors import RecipeError

    cat = load_catalogue(list(o.recipes_dir))
    recipe = cat.resolve(o.recipe)
    python = load_base(recipe.toolchain.base).python or "?"
    lk = find_lock(recipe.name, recipe.version, python)
    if lk is None:
        raise RecipeError(
            f"{recipe.ref} has no closure lock for CPython {python} "
            f"({lock_path(recipe.name, recipe.version, python)})",
            hint=f"make one with `rvport lock {recipe.ref}` (docs/closure.md)",
        )
    fopts = handoff.fetch_options(o)
    u = ui()
    doc = wh.make(
        lk,
        wh.Options(
            output=o.wheelhouse_dir,
            artifacts=tuple(o.artifacts),
            profile=get_profile(o.profile),
            fetch=fopts,
            allow_expired=o.allow_expired_release,
            carries=carrying(cat, lk),
            gcc=load_base(lk.target.base).gcc,
        ),
        log=lambda m: u.err.print(one_line(m), markup=False, highlight=False),
    )
    u.console.print(counts_table(lk.summary()), crop=False)
    u.console.print(
        f"wrote {one_line(o.wheelhouse_dir)}: {len(doc['wheels'])} wheels, {wh.REQUIREMENTS}, "
        f"{wh.DEBIAN_LIST} "
        f"({len(doc['debian']) + len(doc['system'])} packages), "
        + (f"{inductor.ENV_FILE}, " if doc["inductor"] else "")
        + wh.MANIFEST,
        markup=False,
    )


@settings.command(
    settings.SERVE_CHECK,
    short_help="Install a wheelhouse offline in a riscv64 container; the program generates and serves.",
)
def serve_check(o: ServeCheckArgs) -> None:
    """Install a wheelhouse offline in a clean riscv64 container and see the recipe's program run: for vllm,
    `pip install` of the wheelhouse, `pip check`, `from vllm import LLM`, 8 tokens generated from a tiny Llama
    with dummy weights (time to first token, tokens per second), then `vllm serve` answering /v1/completions;
    both in vLLM's default configuration (torch.compile, with the wheelhouse's inductor-env.sh) and with
    enforce-eager (--skip-generate and --skip-serve leave them out); then the recipe's own tests (its
    serve_tests: for the profile, from its pinned sdist or --source-tree, in one pytest run in the
    installed environment; --skip-tests leaves them out), and the shared objects inductor compiled verified
    for the profile.

    The container runs with no network, the profile's QEMU CPU and the wheelhouse read-only, in an image of
    the riscv64 base with the wheelhouse's Debian packages at their locked versions (made once: the one step
    that uses the network, for apt). Each step is logged and has a hard --timeout. DIR/result.json records
    every step, the figures, the image and the host's load average; a failed step exits 10
    (docs/closure.md)."""
    from rvport.closure import servecheck

    recipe, _, version = o.recipe.partition("==")
    opts = servecheck.Options(
        recipe=recipe,
        version=version or None,
        wheelhouse=o.wheelhouse,
        output=o.check_dir,
        profile=o.profile,
        fetch=handoff.fetch_options(o),
        allow_expired=o.allow_expired_release,
        skip_serve=o.skip_serve,
        skip_generate=o.skip_generate,
        skip_tests=o.skip_tests,
        source_tree=o.source_tree,
        recipes_dir=tuple(o.recipes_dir),
        timeout=float(o.timeout),
        fresh_install=o.fresh_install,
    )
    u = ui()
    # JUnit on standard output: the table and the lines go to stderr
    say = u.err if outputs.one_stdout(junit=o.junit) else u.console
    doc = servecheck.run(opts, log=lambda m: u.err.print(m, markup=False, highlight=False))
    say.print(steps_table(doc), crop=False)
    for line in figures_lines(doc):
        say.print(line, markup=False, highlight=False)
    say.print(f"wrote {one_line(o.check_dir / servecheck.RESULT)}", markup=False, soft_wrap=True)
    if o.junit is not None:
        written = ci.write_serve_check_junit(o.junit, doc)
        if written is not None:
            say.print(f"wrote {one_line(written)}", markup=False, soft_wrap=True)
    if not doc["passed"]:
        raise servecheck.failure(doc, o.check_dir)


def steps_table(doc: dict) -> Table:
    t = Table(title=f"serving check of {doc['recipe']} {doc['version']} ({doc['profile']})")
    for col in ("step", "status", "seconds", "note"):
        t.add_column(col, justify="right" if col == "seconds" else "left")
    for s in doc["steps"]:
        note = ""
        if s.get("timed_out"):
            note = "timed out"
        elif s.get("hung_after_result"):
            note = "printed its result, did not exit: stopped"
        elif s["name"] == "guided" and s.get("failures"):
            note = s["failures"][0][:80]
        elif s["name"] == "pip-check" and "lines" in s:
            note = f"{len(s.get('judged', []))} judged, {len(s.get('not_judged', []))} Debian's own"
        elif s["name"] == "tests" and s.get("tests"):
            c = s["tests"]["counts"]
            note = f"{c['passed']} passed, {c['failed']} failed, {c['error']} errors, {c['skipped']} skipped"
        elif s["name"] == "tests" and s.get("reason"):
            note = s["reason"]
        elif s["status"] == "failed" and s.get("excerpt"):
            note = s["excerpt"][-1][:80]
        seconds = s.get("seconds")
        t.add_row(s["name"], s["status"], "" if seconds is None else f"{seconds:.0f}", note)
    return t


def figures_lines(doc: dict) -> list[str]:
    """The figures that were measured, one a line (figures only: under QEMU they are not a board's)."""
    f, load = doc["figures"], doc.get("load_average") or {}
    out = []
    if f.get("ttft_seconds") is not None:
        out.append(
            f"generate: time to first token {f['ttft_seconds']} s, {f['tokens_per_second']} tokens/s "
            f"(engine ready in {f['load_seconds']} s)"
        )
    if f.get("serve_tokens_per_second") is not None:
        out.append(
            f"serve: ready in {f['serve_startup_seconds']} s, /v1/completions {f['serve_tokens_per_second']} "
            "tokens/s"
        )
    e = f.get("eager") or {}
    if e.get("ttft_seconds") is not None:
        out.append(
            f"generate-eager: time to first token {e['ttft_seconds']} s, {e['tokens_per_second']} tokens/s "
            f"(engine ready in {e['load_seconds']} s)"
        )
    if e.get("serve_tokens_per_second") is not None:
        out.append(
            f"serve-eager: ready in {e['serve_startup_seconds']} s, /v1/completions "
            f"{e['serve_tokens_per_second']} tokens/s"
        )
    guided = next((s for s in doc["steps"] if s["name"] == "guided"), {})
    for name, got in ((guided.get("result") or {}).get("backends") or {}).items():
        verdict = "pass" if got["passed"] else "FAIL"
        ready = f", ready in {got['startup_seconds']} s" if got.get("startup_seconds") is not None else ""
        asked = ", ".join(
            f"{k} {'pass' if r['passed'] else 'FAIL'}" for k, r in got["requests"].items()
        )  # fmt: skip
        out.append(f"guided {name}: {verdict}{ready}" + (f" ({asked})" if asked else ""))
    compiled = doc.get("inductor")
    if compiled:
        verdict = "pass" if compiled["passed"] else "FAIL"
        n, profile = compiled["objects"], doc["profile"]
        out.append(f"inductor: {n} shared object(s) compiled, verify for {profile}: {verdict}")
    if load:
        span = f"{load['min']}-{load['max']} (mean {load['mean']})"
        out.append(f"host load average {span} on {load['cpus']} CPUs")
    return out


def carrying(cat, lock) -> frozenset[str]:  # type: ignore[no-untyped-def]
    """The lock's recipe distributions whose recipe (at the locked version) declares its wheel `isa:
    profile`: the wheelhouse verifies that they carry the profile's extensions."""
    from rvport.catalogue.closure_lock import Origin
    from rvport.vocab import OutputIsa, OutputType

    out = set()
    for e in lock.by_origin(Origin.RECIPE):
        for r in cat.recipes.get(e.recipe or "", ()):
            if r.version == e.version and any(
                x.type is OutputType.WHEEL and x.isa is OutputIsa.PROFILE for x in r.outputs
            ):
                out.add(e.name)
    return frozenset(out)
