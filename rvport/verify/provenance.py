"""SLSA provenance v1 of a build, as an in-toto Statement v1 (unsigned), and the check of artifacts against
one.

    statement(result_doc, plan_doc, builder=...)   pure: result.json's (and plan.json's) document -> statement
    write_beside(output, result_doc, plan_doc)     OUTPUT/provenance.json, atomically (the build runner's
    hook) load(path) -> Provenance; check(provenance, path, sha256) -> (reasons, notes)   what `verify
    --provenance` does

The statement names every artifact with its sha256 (the subjects), what was asked (external parameters:
recipes, profile, mode, tag), how it was built (internal parameters: the profile's flags, each stage's mode,
commands and environment), everything that went in (resolved dependencies: sources, patches, lock files,
vendored crates or Go modules by their lock's digest, base, toolchain and dependency artifacts), and who built
it when (run details).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from rvport import __version__
from rvport.catalogue.model import LOCK_NAMES
from rvport.errors import UsageError
from rvport.fileio import MiB, atomic_write_text, read_json

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://rvport.dev/provenance/build/v1"  # what the parameters below mean: docs/verify.md
BUILDER_ID = "https://rvport.dev/builder/buildx"  # + "/<buildx driver>" when it is known
FILENAME = "provenance.json"  # beside result.json
PROVENANCE_MAX_BYTES = 16 * MiB  # a statement names each artifact once: a whole catalogue's is a few KiB
# arrays and objects in one statement (a catalogue's has a few hundred), and subjects: each array costs the
# parser tens of bytes, so a file of nothing but `[]` would take far more memory than its size
PROVENANCE_MAX_CONTAINERS = 100_000
PROVENANCE_MAX_SUBJECTS = 10_000

_SHA256 = re.compile(r"^(?:sha256:)?([0-9a-f]{64})\Z")
_TIME = "%Y-%m-%dT%H:%M:%SZ"


# ---- the statement: pure
# ----------------------------------------------------------------------------------------


def statement(
    result: Mapping[str, Any],
    plan: Mapping[str, Any] | None = None,
    *,
    builder: Mapping[str, Any] | None = None,
    version: str = __version__,
) -> dict:
    """The in-toto Statement v1 with a SLSA provenance v1 predicate for a build's result.json document.

    plan: plan.json's document of the same run (patches, lock files, vendoring, requested mode, outputs);
    builder: the buildx builder as `docker buildx inspect` describes it ({"name", "driver"}), when known."""
    plan_stages = {s["recipe"]: s for s in (plan or {}).get("stages", [])}
    by_id = {s.get("id") or s["recipe"]: s for s in (plan or {}).get("stages", [])}  # msgspec-cp314, ...
    stages = list(result.get("stages", []))
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {
                "name": a["path"],
                "digest": {"sha256": a["sha256"]},
                "annotations": {"recipe": a.get("recipe"), "size": a.get("size")}
                | ({"vlen": "exact"} if _vlen_exact(a, by_id) else {}),
            }
            for a in sorted(result.get("artifacts", []), key=lambda a: a["path"])
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "recipes": [f"{s['recipe']}=={s['version']}" for s in stages],
                    "profile": (result.get("profile") or {}).get("name"),
                    "mode": (plan or {}).get("mode"),
                    "tag": result.get("tag"),
                },
                "internalParameters": {
                    "profile": result.get("profile"),
                    "host": result.get("host"),
                    "stages": [_stage_parameters(s, plan_stages.get(s["recipe"], {})) for s in stages],
                },
                "resolvedDependencies": _dependencies(result, stages, plan_stages),
            },
            "runDetails": {
                "builder": _builder(result.get("builder"), builder, version),
                "metadata": _metadata(result),
            },
        },
    }


def _vlen_exact(artifact: Mapping[str, Any], stages: Mapping[str, Any]) -> bool:
    """An artifact that an output of its stage's plan names `vlen: exact` (by the output's glob on its file
    name, as the build's verify matches it). `stages`: the plan's stages by id (result.json's artifacts
    name their stage by it: the recipe, or recipe-cpXY in a --python plan)."""
    outputs = stages.get(artifact.get("recipe"), {}).get("outputs") or []
    name = PurePosixPath(str(artifact.get("path", ""))).name
    return any(o.get("vlen") == "exact" and fnmatch.fnmatch(name, o.get("glob", "")) for o in outputs)


def _stage_parameters(s: Mapping[str, Any], p: Mapping[str, Any]) -> dict:
    out = {
        k: s.get(k)
        for k in (
            "recipe",
            "version",
            "kind",
            "mode",
            "platform",
            "status",
            "key",
            "plan_key",
            "commands",
            "env",
            "build_command",
        )
    }
    out["outputs"] = p.get("outputs")
    return out


def _descriptor(name: str, digest: str | None, *, uri: str | None = None, **annotations: Any) -> dict | None:
    """A ResourceDescriptor: a name, a sha256 digest and/or a URI (one of them at least), annotations."""
    m = _SHA256.match(digest or "")
    d: dict[str, Any] = {"name": name}
    if uri:
        d["uri"] = uri
    if m:
        d["digest"] = {"sha256": m.group(1)}
    if "uri" not in d and "digest" not in d:
        return None
    notes = {k: v for k, v in annotations.items() if v not in (None, "", [], {})}
    if notes:
        d["annotations"] = notes
    return d


def _source_uri(fetched: Mapping[str, Any], planned: Mapping[str, Any]) -> str | None:
    """A URI for a source: a package URL for an index project, git+REPO@COMMIT, or the URL it names."""
    if planned.get("kind") == "pypi" and planned.get("project"):
        return f"pkg:pypi/{planned['project']}@{planned.get('version', '')}"
    if planned.get("kind") == "git" and planned.get("repo"):
        return f"git+{planned['repo']}@{planned.get('commit', '')}"
    return planned.get("url") or fetched.get("url")


def _dependencies(
    result: Mapping[str, Any],
    stages: Sequence[Mapping[str, Any]],
    plan_stages: Mapping[str, Mapping[str, Any]],
) -> list[dict]:
    deps: list[dict | None] = []
    base_ids = set()
    for key, b in sorted((result.get("base_images") or {}).items()):
        base_ids.add(b.get("image_id"))
        deps.append(
            _descriptor(
                f"base/{key}",
                b.get("image_id"),
                spec=b.get("spec"),
                tag=b.get("tag"),
                platform=b.get("platform"),
                source=b.get("source"),
                release_sha256=b.get("release_sha256"),
            )
        )
    artifacts = {s["recipe"]: s.get("artifacts") or [] for s in stages}
    for s in stages:
        r = s["recipe"]
        p = plan_stages.get(r, {})
        planned_sources = {x["name"]: x for x in p.get("sources", [])}
        for src in s.get("sources") or []:
            if src.get("from") == "local":
                deps.append(_local_descriptor(f"{r}/source/{src['name']}", src))
                continue
            deps.append(
                _descriptor(
                    f"{r}/source/{src['name']}",
                    src.get("sha256"),
                    uri=_source_uri(src, planned_sources.get(src["name"], {})),
                    filename=src.get("filename"),
                    origin=src.get("origin"),
                )
            )
        for pf in p.get("patches", []):
            deps.append(_descriptor(f"{r}/patch/{pf['file']}", pf.get("sha256"), strip=pf.get("strip")))
        for pf in p.get("lockfiles", []):
            deps.append(_descriptor(f"{r}/lockfile/{pf['file']}", pf.get("sha256"), dest=pf.get("dest")))
        for pf in p.get("files", []):
            deps.append(_descriptor(f"{r}/file/{pf['file']}", pf.get("sha256"), dest=pf.get("dest")))
        if p.get("vendor"):
            deps.append(_vendored(r, p, s))
        for role, image_id in sorted((s.get("images") or {}).items()):
            if image_id in base_ids:
                continue
            tc = role == "toolchain"
            deps.append(
                _descriptor(
                    f"{r}/image/{role}",
                    image_id,
                    pins=p.get("toolchain") if tc else None,
                    packages=s.get("toolchain_packages") if tc else None,
                    cross=s.get("toolchain") if tc else None,
                )
            )
        for dep in p.get("depends", []):
            for a in artifacts.get(dep, []):
                deps.append(_descriptor(f"{r}/depends/{a['path']}", a.get("sha256"), recipe=dep))
    return [d for d in deps if d is not None]


def _local_descriptor(name: str, src: Mapping[str, Any]) -> dict:
    """A local tree (--source-tree) as a resolved dependency: a file URI, its tree digest (the canonical
    digest of docs/sources.md, not a file's sha256: named `rvportTreeSha256`), and annotations that say it
    was local, not pinned, with its git commit and whether it was dirty."""
    local = src.get("local") or {}
    git = local.get("git") or {}
    m = _SHA256.match(str(local.get("tree") or src.get("tree") or ""))
    notes: dict[str, Any] = {"source": "local", "pinned": False, "path": local.get("path")}
    if git:
        notes["gitCommit"] = git.get("commit")
        notes["dirty"] = bool(git.get("dirty"))
    d: dict[str, Any] = {"name": name, "uri": "file://" + quote(str(local.get("path") or ""))}
    if m:
        d["digest"] = {"rvportTreeSha256": m.group(1)}
    d["annotations"] = {k: v for k, v in notes.items() if v is not None}
    return d


def _vendored(recipe: str, p: Mapping[str, Any], s: Mapping[str, Any]) -> dict | None:
    """Vendored crates or Go modules, named by the digest of the lock that pins them: the recipe's pinned lock
    file when it has one, else the tree's own lock file the recipe pins (`lock:`), else the source archive
    that carries it (Cargo.lock or go.sum inside it)."""
    tool = p["vendor"]
    lock_name = LOCK_NAMES.get(tool, "")
    pinned = [pf for pf in p.get("lockfiles", []) if (pf.get("dest") or pf["file"]).endswith(lock_name)]
    if pinned:
        return _descriptor(f"{recipe}/vendor/{tool}", pinned[0].get("sha256"), lock=pinned[0]["file"])
    if p.get("lock"):
        return _descriptor(
            f"{recipe}/vendor/{tool}", p["lock"]["sha256"], lock=f"{p['lock']['path']} inside the source tree"
        )
    main = next((x for x in p.get("sources", []) if not x.get("dest")), None)
    fetched = {x["name"]: x for x in s.get("sources") or []}
    src = fetched.get(main["name"]) if main else None
    if src is None:
        return None
    return _descriptor(
        f"{recipe}/vendor/{tool}",
        src.get("sha256"),
        lock=f"{lock_name} inside source {src['name']} (the digest is the source archive's)",
    )


def _builder(name: str | None, info: Mapping[str, Any] | None, version: str) -> dict:
    info = info or {}
    driver = info.get("driver")
    versions = {"rvport": version, "buildx.builder": info.get("name") or name or "default"}
    if driver:
        versions["buildx.driver"] = driver
    return {"id": f"{BUILDER_ID}/{driver}" if driver else BUILDER_ID, "version": versions}


def _metadata(result: Mapping[str, Any]) -> dict:
    started = result.get("started")
    if not started:
        return {}
    out = {"startedOn": started}
    try:
        t0 = datetime.strptime(started, _TIME).replace(tzinfo=UTC)
    except ValueError:
        return out
    t1 = t0 + timedelta(seconds=round(float(result.get("duration_s") or 0)))
    out["finishedOn"] = t1.strftime(_TIME)
    return out


# ---- writing it beside result.json
# -----------------------------------------------------------------------------


def write_beside(
    output: Path,
    result: Mapping[str, Any],
    plan: Mapping[str, Any] | None = None,
    builder: Mapping[str, Any] | None = None,
) -> Path | None:
    """OUTPUT/provenance.json for a run that finished with artifacts; written whole or not at all. For a
    failed or interrupted run, none: a statement left from an earlier run is removed, so it never sits beside
    a result.json it does not describe."""
    path = output / FILENAME
    if result.get("status") != "ok" or not result.get("artifacts"):
        path.unlink(missing_ok=True)
        return None
    atomic_write_text(
        path, json.dumps(statement(result, plan, builder=builder), indent=2, sort_keys=True) + "\n"
    )
    return path


# ---- checking artifacts against a statement
# --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Subject:
    name: str
    sha256: str
    vlen_exact: bool = False  # annotations.vlen "exact": its recipe's output says its vector code is so


@dataclass(frozen=True, kw_only=True)
class Provenance:
    path: str
    subjects: tuple[Subject, ...]
    profile: str | None  # externalParameters.profile, when the statement is rvport's


def load(path: Path) -> Provenance:
    """Read a provenance statement. UsageError (with the file, and the line for bad JSON) when it is not an
    in-toto Statement v1 whose subjects have sha256 digests."""
    doc = read_json(
        path,
        what="provenance",
        limit=PROVENANCE_MAX_BYTES,
        hint="pass the provenance.json a build wrote (an in-toto Statement v1)",
        max_containers=PROVENANCE_MAX_CONTAINERS,
    )
    hint = "rvport writes one beside result.json (OUTPUT/provenance.json)"
    if not isinstance(doc, dict) or doc.get("_type") != STATEMENT_TYPE:
        got = doc.get("_type") if isinstance(doc, dict) else type(doc).__name__
        raise UsageError(
            f"{path}: not an in-toto Statement v1 (_type is {got!r}, not {STATEMENT_TYPE!r})", hint=hint
        )
    subjects: list[Subject] = []
    listed = doc.get("subject") or []
    if isinstance(listed, list) and len(listed) > PROVENANCE_MAX_SUBJECTS:
        raise UsageError(
            f"{path}: the statement has {len(listed)} subjects, over the cap of {PROVENANCE_MAX_SUBJECTS}",
            hint=hint,
        )
    for i, s in enumerate(listed if isinstance(listed, list) else [None]):
        digest = s.get("digest") if isinstance(s, dict) else None
        sha = digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(sha, str) or not _SHA256.match(sha) or sha.startswith("sha256:"):
            raise UsageError(f"{path}: subject {i} has no sha256 digest", hint=hint)
        notes = s.get("annotations")
        exact = isinstance(notes, dict) and notes.get("vlen") == "exact"
        subjects.append(Subject(name=str(s.get("name") or "_"), sha256=sha, vlen_exact=exact))
    if not subjects:
        raise UsageError(f"{path}: the statement has no subject", hint=hint)
    params: object = doc
    for key in ("predicate", "buildDefinition", "externalParameters"):
        params = params.get(key) if isinstance(params, dict) else None
    profile = (
        params.get("profile")
        if isinstance(params, dict) and doc.get("predicateType") == PREDICATE_TYPE
        else None
    )
    return Provenance(
        path=str(path), subjects=tuple(subjects), profile=profile if isinstance(profile, str) else None
    )


def _same_name(subject: str, path: str) -> bool:
    """The subject names the file: its path ends with the subject's path (artifacts/<recipe>/<file>)."""
    want = [p for p in subject.split("/") if p not in ("", ".")]
    have = Path(path).parts
    return bool(want) and list(have[-len(want) :]) == want


def is_vlen_exact(prov: Provenance, sha256: str | None) -> bool:
    """Whether the statement names a file of this sha256 as VLEN-exact vector code (its recipe's `vlen:
    exact` output): then verify judges it so (policy.rule_vlen)."""
    return sha256 is not None and any(s.vlen_exact and s.sha256 == sha256 for s in prov.subjects)


def check(prov: Provenance, path: str, sha256: str | None) -> tuple[list[str], list[str]]:
    """Pure: (reasons, notes) for one artifact file against a statement's subjects."""
    if sha256 is None:
        return [f"cannot read the file to compare it with provenance {prov.path}"], []
    named = [s for s in prov.subjects if _same_name(s.name, path)]
    for s in named:
        if s.sha256 == sha256:
            return [], [f"provenance: subject {s.name}, sha256 matches"]
    if named:
        s = named[0]
        return [
            f"sha256 {sha256} differs from provenance subject {s.name} ({s.sha256}): "
            "the file changed after the build"
        ], []
    same = next((s for s in prov.subjects if s.sha256 == sha256), None)
    if same is not None:
        return [], [f"provenance: sha256 matches subject {same.name}"]
    return [f"not a subject of provenance {prov.path}: no subject has its name or its sha256"], []
