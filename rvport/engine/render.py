"""Renders Dockerfiles from the templates in resources/dockerfiles/ (placeholders are @@NAME@@).

Template mechanics only: which template a stage uses is its mode's choice (rvport/engine/modes/).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rvport import resources
from rvport.catalogue import layers
from rvport.catalogue.kinds import KINDS
from rvport.catalogue.profiles import Profile
from rvport.fileio import read_regular
from rvport.vocab import BuildTree, Kind

_PLACEHOLDER = re.compile(r"@@([A-Z_]+)@@")

# The templates are resources/dockerfiles/NAME.Dockerfile; a mode picks its own by NAME: toolchain, build,
# smoke, runtime; cross and cross-toolchain (a build-platform container with a riscv64 cross toolchain, the
# kind's environment given by rvport/catalogue/kinds.py); accelerated and accelerated-prefix (a riscv64 stage
# whose compilers are native cross ones, and the prefix image of those, /opt/xtc). A new mode's template
# needs no entry anywhere.
TEMPLATE_SUFFIX = ".Dockerfile"


def default_dockerfiles_dir() -> Path:
    """The built-in templates (rvport/resources/dockerfiles); RVPORT_DOCKERFILES overrides."""
    return resources.directory("dockerfiles")


@dataclass(frozen=True, kw_only=True)
class Rendered:
    template: str
    text: str
    # files of the build context beside the Dockerfile, (name, text) each: scripts it runs (resources/scripts)
    files: tuple[tuple[str, str], ...] = ()

    @property
    def sha256(self) -> str:
        """The Dockerfile's digest; with files, of the Dockerfile and the files (name and text each)."""
        if not self.files:
            return hashlib.sha256(self.text.encode()).hexdigest()
        return hashlib.sha256(json.dumps([self.text, sorted(self.files)]).encode()).hexdigest()


TEMPLATE_MAX_BYTES = 1 << 20  # the largest built-in template is under 8 KiB


def render(stage: str, values: Mapping[str, str], root: Path | None = None) -> Rendered:
    name = stage + TEMPLATE_SUFFIX
    root = root or default_dockerfiles_dir()
    text = read_regular(
        root / name,
        limit=TEMPLATE_MAX_BYTES,
        what="Dockerfile template",
        hint="RVPORT_DOCKERFILES names a directory of stage templates (NAME.Dockerfile, regular files): "
        "unset it for the built-in ones",
    ).decode("utf-8", errors="replace")
    missing = sorted(set(_PLACEHOLDER.findall(text)) - set(values))
    if missing:
        raise KeyError(f"{name}: no value for {', '.join(missing)}")
    return Rendered(template=name, text=_PLACEHOLDER.sub(lambda m: values[m.group(1)], text))


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def env_lines(env: Mapping[str, str]) -> str:
    """ENV instructions, one per variable, each value in double quotes with `\\` and `"` escaped (a `$` is
    left for the Dockerfile's own substitution: recipes write ${RVPORT_JOBS}). Recipes are checked on load
    (env names, no control characters); a name or value that could end the line or the instruction is
    refused here too, so that no value ever writes an instruction of its own."""
    for k, v in env.items():
        if not _ENV_NAME.fullmatch(k) or _CONTROL.search(v):
            raise ValueError(f"environment variable {k!r}={v!r} cannot be written as one ENV instruction")
    return "\n".join(f"ENV {k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(env.items()))


# The build script: resources/scripts/build-prologue.sh, then the recipe's commands. Its prologue sets
# SOURCE_DATE_EPOCH (reproducible builds), unless the recipe does, to the newest time in the prepared sources
# (rvport clamps the times of the files it adds or patches to the sources' own,
# rvport.sources.tree.clamp_mtimes); wheel builders, auditwheel and many compilers honour it. The script is
# part of the artifact cache key, byte for byte.
BUILD_PROLOGUE = "build-prologue.sh"


def build_script(commands: list[str] | tuple[str, ...]) -> str:
    return resources.script(BUILD_PROLOGUE) + "\n".join(commands) + "\n"


# Where the build step's /src comes from (the recipe's `build_tree:`): the build context's src/ bound in
# (writes are dropped with the step), or copied from there into a tmpfs first (`cp -a`: the same files, modes,
# times and links as the bind shows; dropped with the step too).
SRC_IN = "/rvport/src-in"


def source_mount(tree: BuildTree) -> dict[str, str]:
    """The stage Dockerfiles' SRC_MOUNT (the build step's mounts for /src) and SRC_COPY (its first command,
    with its `&&`, or nothing)."""
    if tree is BuildTree.MEMORY:
        return {
            "SRC_MOUNT": f"--mount=type=bind,source=src,target={SRC_IN} --mount=type=tmpfs,target=/src",
            "SRC_COPY": f"cp -a {SRC_IN}/. /src/ && ",
        }
    return {"SRC_MOUNT": "--mount=type=bind,source=src,target=/src,rw", "SRC_COPY": ""}


CPUINFO_SCRIPT = "rvport-cpuinfo.sh"  # in every build context; /rvport/cpuinfo.sh in the stage


def cpuinfo_script() -> str:
    """Checks that an emulated stage's /proc/cpuinfo shows its profile's ISA (resources/scripts)."""
    return resources.script("cpuinfo-check.sh")


def cpuinfo_check(p: Profile) -> str:
    """The command an emulated build stage runs before the build: its /proc/cpuinfo must be the profile's."""
    shown, hidden = p.cpuinfo
    args = [p.name, " ".join(shown), " ".join(hidden), str(p.vlen)]
    return "sh -eu /rvport/cpuinfo.sh " + " ".join(shlex.quote(a) for a in args) + " && "


# The smoke stage's build context beside its Dockerfile, artifacts and test: name -> resources/scripts name.
SMOKE_SCRIPTS: Mapping[str, str] = {"rvport-smoke-install.sh": "smoke-install.sh"}


def smoke_commands(kind: Kind, script: str) -> tuple[str, str]:
    """(install, run) commands of a smoke test of this build kind (install: resources/scripts/smoke-install.sh
    for the kinds whose artifacts are wheels: the stage's own, then its dependencies' in /rvport/deps)."""
    install = (
        "sh -eu /rvport/smoke-install.sh /artifacts /rvport/deps" if KINDS[kind].installs_wheels else "true"
    )
    run = "sh /rvport/smoke" if script.lstrip().startswith("#!") else "python3 /rvport/smoke"
    return install, run


def smoke_dockerfile(
    *,
    image: str,
    qemu_cpu: str,
    profile: Profile,
    install: str,
    run: str,
    without_vector_cpu: str | None = None,
    root: Path | None = None,
) -> Rendered:
    """The smoke stage's Dockerfile (smoke.Dockerfile): the test in `image` on the profile's QEMU CPU, with
    RVPORT_PROFILE and RVPORT_VLEN set; with `without_vector_cpu` (`smoke: without_vector:`) the same test
    again on that CPU."""
    for what, value in (("QEMU CPU", qemu_cpu), ("QEMU CPU without V", without_vector_cpu or "")):
        if not _QEMU_CPU.fullmatch(value or "x"):
            raise ValueError(f"{what} {value!r} cannot be written into the smoke stage")
    return render(
        "smoke",
        {
            "IMAGE": image,
            "QEMU_CPU": qemu_cpu,
            "PROFILE": shlex.quote(profile.name),
            "VLEN": str(int(profile.vlen)),
            "INSTALL": install,
            "RUN": run,
            "WITHOUT_VECTOR_CPU": shlex.quote(without_vector_cpu) if without_vector_cpu else "''",
        },
        root,
    )


# a QEMU CPU model with its properties (profiles.yaml): rv64,v=true,vlen=256,...
_QEMU_CPU = re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+(=[A-Za-z0-9_.-]+)?)*")
QEMU_CPU = _QEMU_CPU  # what a QEMU CPU written into a Dockerfile may be (the tests stage checks it too)


def smoke_scripts() -> dict[str, str]:
    """The smoke stage's scripts by their name in its build context (SMOKE_SCRIPTS), with their text."""
    return {name: resources.script(script) for name, script in SMOKE_SCRIPTS.items()}


def packages_arg(packages: list[str] | tuple[str, ...]) -> str:
    return " ".join(shlex.quote(p) for p in sorted(set(packages)))


def _uncommented(fragment: str) -> str:
    """A fragment's text without its comment lines and trailing newline."""
    return "\n".join(ln for ln in fragment.rstrip("\n").split("\n") if not ln.lstrip().startswith("#"))


def toolchain_dockerfile(base_tag: str, qemu_cpu: str, packages: tuple[str, ...]) -> Rendered:
    """An image of `base_tag` plus Debian packages (a stage's toolchain, its smoke test's runtime, a serving
    check's image): one apt RUN per shared layer the packages name (catalogue/layers.py), then one for the
    rest (none when nothing is left)."""
    shared, rest = layers.split(tuple(packages))
    installs = [
        _uncommented(render("toolchain-install", {"PACKAGES": packages_arg(group)}).text)
        for group in (*shared, *((rest,) if rest else ()))
    ]
    return render("toolchain", {"BASE": base_tag, "QEMU_CPU": qemu_cpu, "INSTALLS": "\n".join(installs)})
