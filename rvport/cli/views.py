"""Rich renderings of plans, results, recipes and doctor checks (no logic beyond layout)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rvport.build.doctor import Check
from rvport.plan.planner import Plan
from rvport.catalogue.recipes import Catalogue, Recipe


def plan_table(plan: Plan) -> Table:
    p = plan.request.profile
    t = Table(title=f"plan: profile {p.name} ({p.march}, {p.mabi}), tag {plan.request.tag}, "
                    f"host {plan.host.arch}", title_justify="left")
    for col in ("#", "recipe", "kind", "mode", "jobs", "sources", "depends"):
        t.add_column(col, overflow="fold")
    for i, s in enumerate(plan.stages, 1):
        srcs = "\n".join(escape(f"{src.name}: "
                                f"{src.sha256[:16] + '…' if src.sha256 else 'to be recorded on first verified fetch'}"
                                f" ({s.source_locations.get(src.name, '?')})")
                         for src in s.recipe.sources)
        t.add_row(str(i), s.recipe.ref, s.recipe.kind.value, f"{s.mode.value}\n[dim]{s.mode_reason}[/]",
                  str(s.jobs), srcs, ", ".join(s.depends) or "-")
    return t


def recipes_table(cat: Catalogue) -> Table:
    layers = ", ".join(str(d) for d in cat.user_dirs)
    t = Table(title="recipes" + (f" ({layers} over the built-in catalogue)" if layers else ""), title_justify="left")
    for col in ("name", "versions", "kind", "depends", "from", "description"):
        t.add_column(col, overflow="fold")
    for name in cat.names:
        d = cat.default(name)
        versions = ", ".join(f"[bold]{r.version}[/]" if r is d else r.version for r in cat.recipes[name])
        t.add_row(name, versions, d.kind.value, ", ".join(d.depends) or "-", cat.origin(name), d.description)
    return t


def recipe_detail(r: Recipe) -> Table:
    t = Table(title=f"{r.ref} ({r.kind.value})", show_header=False, title_justify="left")
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    t.add_row("file", str(r.file))
    t.add_row("from", r.origin)
    t.add_row("description", r.description)
    t.add_row("hermetic", "yes" if r.hermetic else f"no: {r.note or ''}")
    for s in r.sources:
        t.add_row(f"source {s.name}", f"{s.origin}\nsha256 {s.sha256 or 'to be recorded on first verified fetch'}")
    for p in r.patches:
        t.add_row("patch", f"{p.rel} (sha256 {p.sha256})")
    for p in r.lockfiles:
        t.add_row("lock file", f"{p.rel} -> {p.dest} (sha256 {p.sha256})")
    if r.vendor:
        t.add_row("vendor", r.vendor)
    t.add_row("depends", ", ".join(r.depends) or "-")
    tc = r.toolchain
    t.add_row("toolchain", f"base {tc.base}; debian: {', '.join(tc.debian) or '-'}"
                           + (f"; go {tc.go}" if tc.go else "") + (f"; rust {tc.rust}" if tc.rust else ""))
    t.add_row("env", "\n".join(f"{k}={v}" for k, v in sorted(r.env.items())) or "-")
    t.add_row("build", "\n".join(r.build))
    t.add_row("outputs", ", ".join(f"{o.glob} ({o.type}, isa {o.isa})" for o in r.outputs))
    t.add_row("modes", ", ".join(r.modes))
    return t


def checks_table(checks: list[Check]) -> Table:
    t = Table(title="rvport doctor", title_justify="left")
    for col in ("check", "", "detail / remedy"):
        t.add_column(col, overflow="fold")
    for c in checks:
        mark = Text("ok", style="green") if c.ok else Text("FAIL" if c.blocking else "warn",
                                                         style="red" if c.blocking else "yellow")
        detail = c.detail + (f"\n[bold]fix:[/] {c.remedy}" if c.remedy and not c.ok else "")
        t.add_row(c.name, mark, detail)
    return t


def result_table(doc: dict) -> Table:
    t = Table(title=f"build {doc['status']}: profile {doc['profile']['name']}, tag {doc['tag']}",
              title_justify="left")
    for col in ("recipe", "status", "time", "artifacts (sha256)"):
        t.add_column(col, overflow="fold")
    for s in doc["stages"]:
        total = sum(s["timings"].values())
        arts = "\n".join(f"{a['path']} {a['size']} B {a['sha256'][:16]}…" for a in s["artifacts"]) or "-"
        style = {"ok": "green", "cached": "green", "failed": "red"}.get(s["status"], "yellow")
        t.add_row(f"{s['recipe']}=={s['version']}", Text(s["status"], style=style), f"{total:.1f}s", arts)
    return t


def prepared_table(prepared: list) -> Table:
    """`rvport prepare`: each image a build will use, and whether it was made now or already there."""
    t = Table(title="images for the build", title_justify="left")
    for col in ("image", "for", "tag", "id", ""):
        t.add_column(col, overflow="fold")
    for i in prepared:
        t.add_row(i.what, i.stage or "-", i.tag, (i.image_id or "")[7:19],
                  "[green]made[/]" if i.made else "already there")
    return t
