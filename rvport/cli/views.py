"""Rich renderings of plans, results, recipes and doctor checks (no logic beyond layout).

Every name, path and message is put in a Text, never in a markup string: a file called `a[b]c` or a
description holding `[/]` is shown as it is."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from rvport.catalogue.model import BUILTIN, Recipe, RuntimeCheck, Source
from rvport.catalogue.recipes import Catalogue
from rvport.cli.ci import MATRIX_HEADERS, matrix_words, smoke_word
from rvport.engine.doctor import Check
from rvport.plan.planner import Plan
from rvport.safetext import one_line


def _whole(name_like: bool, header: str = "", min_width: int = 0) -> dict:
    """Column settings: names, kinds and numbers are never broken; other text wraps at spaces (never narrower
    than
    its header or min_width), and only a word longer than its column (a path, a digest) is folded."""
    if name_like:
        return {"no_wrap": True}
    return {"overflow": "fold", "min_width": max(len(header), min_width)}


def pin_label(src: Source, *, short: bool = False) -> str:
    """How a source is pinned: its archive's sha256, or for a git source its commit and tree digest."""
    cut = (lambda d: d[:16] + "…") if short else (lambda d: d)
    if src.local is not None:
        git = src.local.git
        state = (
            f", commit {(git.commit or '(none)')[: 12 if short else 40]}{' dirty' if git.dirty else ''}"
            if git
            else ""
        )
        return f"local tree {src.local.path}, tree {cut(src.local.digest)}{state} (not pinned)"
    if src.sha256:
        return f"sha256 {cut(src.sha256)}"
    if src.tree:
        commit = f"commit {(src.commit or '')[: 12 if short else 40]}, " if src.commit else ""
        return f"{commit}tree {cut(src.tree)}"
    return "to be recorded on first verified fetch"


def check_words(c: RuntimeCheck) -> str:
    """A runtime check in a few words: its rounds and time allowed."""
    return (
        f"runtime check: {c.rounds} round{'s' if c.rounds > 1 else ''}"
        + (" (a restart between)" if c.restart else "")
        + f", {c.timeout} s each"
    )


# below this many columns the plan's sources go under each recipe instead of a column of their own
NARROW = 120


def _mode_word(plan: Plan, mode: object, chosen: bool) -> str:
    asked = plan.request.mode
    return "auto" if chosen else ("asked for" if mode == asked else f"for {asked.value}")


def plan_table(plan: Plan, width: int = NARROW) -> Table:
    """The plan, a row per stage. Each stage's mode says whether --mode auto chose it or it was asked for;
    the full reason is the stage's `mode_reason` in plan.json. Below NARROW columns the sources are listed
    under the recipe, so that no column is dropped at 80."""
    p = plan.request.profile
    narrow = width < NARROW
    t = Table(
        title=Text(
            f"plan: profile {p.name} ({p.march}, {p.mabi}), tag {plan.request.tag}, host {plan.host.arch}"
        ),
        title_justify="left",
        caption=Text("why each mode: stages[].mode_reason in plan.json", style="dim"),
        caption_justify="left",
    )
    modes = max((len(s.mode.value) for s in plan.stages), default=0)
    longest_ref = max((len(s.recipe.ref) for s in plan.stages), default=0)
    t.add_column("#", no_wrap=True)
    t.add_column("recipe, kind" + (", sources" if narrow else ""), overflow="fold", min_width=longest_ref)
    t.add_column("mode", no_wrap=True, min_width=modes)
    t.add_column("jobs", no_wrap=True)
    if not narrow:
        t.add_column("sources", overflow="fold", min_width=len("sources"))
    t.add_column("depends", overflow="fold", min_width=len("depends"))
    chosen = plan.request.mode.value == "auto"
    for i, s in enumerate(plan.stages, 1):
        srcs = [
            f"{src.name}: {pin_label(src, short=True)} ({s.source_locations.get(src.name, '?')})"
            for src in s.recipe.sources
        ]
        srcs += [f"lock {f.dest or f.path.name}: {f.sha256[:16]}… (recipe)" for f in s.recipe.lockfiles]
        srcs += [f"file {f.dest}: {f.sha256[:16]}… (recipe)" for f in s.recipe.files]
        if s.recipe.lock:
            srcs.append(f"lock {s.recipe.lock.path}: {s.recipe.lock.sha256[:16]}… (in the source)")
        recipe = Text.assemble(s.recipe.ref, "\n", (s.recipe.kind.value, "dim"))
        if s.python is not None:
            recipe.append(f"\n{s.name}: Python {s.python.version} on {s.python.base}", "dim")
        if s.runtime is not None:
            recipe.append(f"\nruntime image {s.runtime.tag}", "dim")
            if s.runtime.spec.check is not None:
                recipe.append(f"\n{check_words(s.runtime.spec.check)}", "dim")
        if narrow:
            recipe.append("".join(f"\n{line}" for line in srcs))
        row = [
            str(i),
            recipe,
            Text.assemble(s.mode.value, "\n", (_mode_word(plan, s.mode, chosen), "dim")),
            str(s.jobs),
            *(() if narrow else (Text("\n".join(srcs)),)),
            Text("\n".join(s.depends) or "-"),
        ]
        t.add_row(*row)
    return t


def recipes_table(cat: Catalogue) -> Table:
    layers = ", ".join(str(d) for d in cat.user_dirs)
    t = Table(
        title=Text(
            "recipes " + (f"({layers} over the built-in catalogue)" if layers else "(built-in catalogue)")
        ),
        title_justify="left",
    )
    longest = max(
        (
            len(r.version) + 1 + (len(" (default)") if len(cat.recipes[n]) > 1 and r is cat.default(n) else 0)
            for n in cat.names
            for r in cat.recipes[n]
        ),
        default=0,
    )
    # where each recipe comes from, only when there is a choice: without directories of the user's, every
    # row would say built-in (the title says it once, and 80 columns keep room for the description)
    cols = ("name, kind", "versions", "depends", *(("from",) if layers else ()), "description")
    for col in cols:
        t.add_column(
            col,
            **_whole(
                col in ("name, kind", "depends"), col, {"versions": longest, "from": len(BUILTIN)}.get(col, 0)
            ),
        )
    for name in cat.names:
        d = cat.default(name)
        several = len(cat.recipes[name]) > 1  # the default said in words too: bold alone needs colour
        versions = Text(", ").join(
            Text(r.version + (" (default)" if several and r is d else ""), style="bold" if r is d else "")
            for r in cat.recipes[name]
        )
        t.add_row(
            Text.assemble(name, "\n", (d.kind.value, "dim")),
            versions,
            Text("\n".join(d.depends) or "-"),
            *((Text(cat.origin(name)),) if layers else ()),
            Text(d.description),
        )
    return t


def recipe_detail(r: Recipe) -> Table:
    t = Table(title=Text(f"{r.ref} ({r.kind.value})"), show_header=False, title_justify="left")
    t.add_column("field", style="bold", no_wrap=True)
    t.add_column("value", overflow="fold")

    def row(field: str, value: str) -> None:
        t.add_row(Text(field), Text(value))

    row("file", str(r.file))
    row("from", r.origin)
    row("description", r.description)
    row("hermetic", "yes" if r.hermetic else f"no: {r.note or ''}")
    for s in r.sources:
        row(
            f"source {s.name}",
            f"{s.origin}\n{pin_label(s)}" + (f"\nleaves out {', '.join(s.exclude)}" if s.exclude else ""),
        )
    for p in r.patches:
        row("patch", f"{p.rel} (sha256 {p.sha256})")
    for p in r.lockfiles:
        row("lock file", f"{p.rel} -> {p.dest} (sha256 {p.sha256})")
    for p in r.files:
        row("added file", f"{p.rel} -> {p.dest} (sha256 {p.sha256})" + (f"\n{p.note}" if p.note else ""))
    if r.vendor:
        row("vendor", r.vendor)
    if r.lock:
        row("lock", f"{r.lock.path} in the source tree (sha256 {r.lock.sha256})")
    row("depends", ", ".join(r.depends) or "-")
    tc = r.toolchain
    row(
        "toolchain",
        f"base {tc.base}; debian: {', '.join(tc.debian) or '-'}"
        + (f"; go {tc.go}" if tc.go else "")
        + (f"; rust {tc.rust}" if tc.rust else ""),
    )
    if tc.pins:
        row("debian pins", "\n".join(f"{p.name} {p.version} (sha256 {p.sha256})" for p in tc.pins))
    row("env", "\n".join(f"{k}={v}" for k, v in sorted(r.env.items())) or "-")
    row("build", "\n".join(r.build))
    row("outputs", ", ".join(f"{o.glob} ({o.type}, isa {o.isa})" for o in r.outputs))
    if r.runtime:
        rt = r.runtime
        files = "\n".join(
            f"{f.dest} ({f.mode}) <- "
            + (f"artifact {f.artifact}" if f.artifact else f"{f.pinned.rel} (sha256 {f.pinned.sha256})")
            for f in rt.files
        )
        row(
            "runtime",
            f"user {rt.user} ({rt.uid}); {'read-only root' if rt.read_only else 'writable root'}"
            + (f", tmpfs {', '.join(rt.tmpfs)}" if rt.tmpfs else "")
            + f"; debian: {', '.join(rt.debian) or '-'}; entrypoint {' '.join(rt.entrypoint)}"
            + (f"; ports {', '.join(str(x) for x in rt.ports)}" if rt.ports else "")
            + "\n"
            + files
            + (f"\n{check_words(rt.check)}" if rt.check else ""),
        )
    row("modes", ", ".join(r.modes))
    return t


def checks_table(checks: list[Check]) -> Table:
    t = Table(title="rvport doctor", title_justify="left")
    for col in ("check", "", "detail / remedy"):
        t.add_column(col, **_whole(col != "detail / remedy", col))
    for c in checks:
        mark = (
            Text("ok", style="green")
            if c.ok
            else Text("FAIL" if c.blocking else "warn", style="red" if c.blocking else "yellow")
        )
        detail = Text(c.detail)
        if c.remedy and not c.ok:
            detail.append("\n").append("fix:", style="bold").append(f" {c.remedy}")
        t.add_row(Text(c.name), mark, detail)
    return t


def result_table(doc: dict) -> Table:
    t = Table(
        title=Text(f"build {doc['status']}: profile {doc['profile']['name']}, tag {doc['tag']}"),
        title_justify="left",
    )
    for col in ("recipe", "status", "smoke", "time", "artifacts (sha256)"):
        t.add_column(col, **_whole(col not in ("smoke", "artifacts (sha256)"), "artifacts"))
    for s in doc["stages"]:
        total = sum(s["timings"].values())
        arts = (
            "\n".join(f"{one_line(a['path'])} {a['size']} B {a['sha256'][:16]}…" for a in s["artifacts"])
            or "-"
        )  # an artifact's name (what a build made) on one line: one row per artifact
        style = {"ok": "green", "cached": "green", "failed": "red"}.get(s["status"], "yellow")
        t.add_row(
            Text(f"{s['recipe']}=={s['version']}"),
            Text(s["status"], style=style),
            Text(smoke_word(s)),
            f"{total:.1f}s",
            Text(arts),
        )
    return t


def prepared_table(prepared: list) -> Table:
    """`rvport prepare`: each image a build will use, and whether it was made now or already there."""
    t = Table(title="images for the build", title_justify="left")
    for col in ("image", "for", "tag", "id", ""):
        t.add_column(col, overflow="fold")
    for i in prepared:
        state = (
            "[yellow]made by rvport build[/]"
            if i.pending
            else "[green]made[/]"
            if i.made
            else "already there"
        )
        t.add_row(i.what, i.stage or "-", i.tag, (i.image_id or "")[7:19], state)
    return t


def matrix_table(doc: dict) -> Table:
    """A build matrix (OUTPUT/matrix.json): a row per profile, a column each for build, smoke, the SIGILL
    check, the smoke test at another VLEN and the upstream tests, and the profile's exit code."""
    t = Table(title=Text(f"build matrix {doc['status']}: tag {doc['tag']}"), title_justify="left")
    for col in MATRIX_HEADERS:
        t.add_column(col, no_wrap=True)
    for r in doc["rows"]:
        style = {"ok": "green", "failed": "red"}.get(r["status"], "yellow")
        t.add_row(
            Text(r["profile"]),
            Text(r["status"], style=style),
            *(Text(w, style=_WORD_STYLES.get(w.split(" ")[0], "")) for w in matrix_words(r)),
            "-" if r["exit_code"] is None else str(r["exit_code"]),
        )
    return t


_WORD_STYLES = {"passed": "green", "failed": "red", "interrupted": "yellow", "finding": "yellow"}
