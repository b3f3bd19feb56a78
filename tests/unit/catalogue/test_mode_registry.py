"""The mode registry (rvport/catalogue/modes.py) is the one place that names the modes: the planner decides
from it, the kinds table reads it, the build layer imports the implementation it names, --mode's help comes
from it. A throwaway mode added to the table alone (and its module) is planned and dispatched."""

from __future__ import annotations

import dataclasses
from enum import StrEnum

import pytest
from typer.testing import CliRunner

from rvport import resources
from rvport.catalogue import modes
from rvport.catalogue.bases import load_bases
from rvport.catalogue.kinds import KINDS
from rvport.catalogue.modes import Hosts, ModeFacts
from rvport.catalogue.profiles import get_profile
from rvport.catalogue.recipes import load_catalogue
from rvport.cli.app import app
from rvport.engine import modes as build_modes
from rvport.errors import UsageError
from rvport.host import HostFacts
from rvport.plan.planner import Request, make_plan
from rvport.target import PLATFORM as RISCV64
from rvport.vocab import Kind, Mode

X86 = HostFacts(arch="x86_64", cpus=2, mem_bytes=24 * 2**30, binfmt_riscv64=True)
RV = HostFacts(arch="riscv64", cpus=64, mem_bytes=128 * 2**30)


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


def plan(cat, *refs, mode=Mode.AUTO, host=X86):
    return make_plan(cat, Request(refs=refs, profile=get_profile("rvv256"), mode=mode), host)


def test_every_mode_has_one_entry_and_an_implementation():
    assert set(modes.MODES) == set(Mode) - {Mode.AUTO}
    assert modes.choices() == tuple(m.value for m in Mode)
    for mode, f in modes.MODES.items():
        assert f.mode is mode
        impl = build_modes.of(mode)
        assert isinstance(impl, build_modes.IMPLEMENTATIONS[mode])
        assert all(callable(getattr(impl, m)) for m in ("bases", "early", "toolchain", "dockerfile"))
        assert f.requested and f.help.startswith(mode.value)
        assert (
            f.instead is not None or f.hosts is Hosts.ANY or f.refused
        )  # a request is taken, moved or refused


def test_the_implementations_are_exactly_the_registrys_modes():
    """Every mode with a registry entry has an implementation in the engine's static mapping, and the mapping
    names no mode the registry does not have (Mode.AUTO is the planner's choice, never built)."""
    assert set(build_modes.IMPLEMENTATIONS) == set(modes.MODES)
    assert Mode.AUTO not in build_modes.IMPLEMENTATIONS
    for mode, cls in build_modes.IMPLEMENTATIONS.items():
        assert cls.__module__.startswith("rvport.engine.modes."), mode
        assert all(callable(getattr(cls, m)) for m in ("bases", "early", "toolchain", "dockerfile")), mode


def test_the_default_modes_of_a_recipe_are_the_registrys(cat, monkeypatch, tmp_path):
    """A recipe that lists no `modes:` gets the registry's defaults (every mode that need not be listed)."""
    assert modes.defaults() == (Mode.NATIVE, Mode.QEMU)
    assert all(not modes.MODES[m].listed for m in modes.defaults())
    text = resources.builtin("recipes", "msgspec.yaml").read_text()
    (tmp_path / "msgspec.yaml").write_text(
        "".join(x for x in text.splitlines(True) if not x.startswith("modes:"))
    )
    assert load_catalogue(tmp_path, builtin=False).resolve("msgspec").modes == modes.defaults()
    assert all(isinstance(m, Mode) for r in cat.recipes.values() for v in r for m in v.modes)
    entry = dataclasses.replace(modes.MODES[Mode.CROSS], listed=False)
    monkeypatch.setitem(modes.MODES, Mode.CROSS, entry)
    assert modes.defaults() == (Mode.NATIVE, Mode.QEMU, Mode.CROSS)


def test_a_request_or_auto_always_finds_a_mode_for_every_kind():
    for kind in Kind:
        for arch in ("x86_64", "aarch64", "riscv64", "ppc64le"):
            assert any(f.admits(kind, modes.defaults(), arch) for f in modes.auto_order()), (kind, arch)


def test_the_bases_a_mode_names_are_build_platform_base_specs():
    specs = load_bases()
    for f in modes.MODES.values():
        assert all(specs[b].arch == "build" for b in f.bases), f.mode


def test_a_kind_a_cross_mode_serves_has_a_cross_toolchain():
    for f in modes.MODES.values():
        if f.build_platform:
            assert f.kinds is not None
            assert all(KINDS[k].cross is not None for k in f.kinds), f.mode


def test_the_kinds_table_reads_the_registry():
    assert KINDS[Kind.PYTHON_WHEEL].modes == {"native", "qemu", "accelerated"}
    assert KINDS[Kind.GO_BINARY].modes == {"native", "qemu", "cross", "accelerated"}
    assert modes.kinds_of(Mode.CROSS) == (Kind.CARGO_STATICLIB, Kind.GO_BINARY)


def test_help_and_choices_come_from_the_table():
    text = modes.help_text()
    assert text.startswith("auto (")
    for f in modes.MODES.values():
        assert f.help in text
    assert modes.choices_text() == "auto, native, qemu, cross or accelerated"


@pytest.mark.parametrize(
    ("verb", "then"), [("plan", ""), ("build", ""), ("reproduce", " The same in both builds.")]
)
def test_the_cli_shows_the_registrys_help(verb, then):
    res = CliRunner().invoke(app, [verb, "--help"], terminal_width=400)
    assert res.exit_code == 0
    assert modes.help_text(then) in " ".join(res.output.split())


# --- a throwaway mode: one more member and entry, and its module; nothing else is edited ---


class Throwaway:
    def bases(self, stage, host):
        return (("debian-trixie-xtc", stage.platform),)

    def early(self, env):
        pass

    def toolchain(self, env):
        raise NotImplementedError

    def dockerfile(self, env, toolchain):
        raise NotImplementedError


@pytest.fixture
def throwaway(monkeypatch):
    """The registry with a throwaway mode: `Mode` with one more member (as rvport/vocab.py would declare it),
    one more entry, and its class in the engine's mapping."""
    extended = StrEnum("Mode", {**{m.name: m.value for m in Mode}, "THROWAWAY": "throwaway"})
    entry = ModeFacts(
        mode=extended.THROWAWAY,
        help="throwaway (a test's)",
        kinds=frozenset({Kind.PYTHON_WHEEL}),
        hosts=Hosts.BUILD_HOSTS,
        auto=-1,  # better than any: auto takes it wherever it is admitted
        build_platform=True,
        bases=("debian-trixie-xtc",),
        requested="requested: thrown away on {platform}",
        chosen="auto: {kind} thrown away on {arch}",
        refused="{ref} ({kind}) cannot be thrown away",
        refused_hint="the throwaway mode is for {kinds} recipes",
    )
    monkeypatch.setattr(modes, "MODES", {**modes.MODES, entry.mode: entry})
    monkeypatch.setattr(
        build_modes, "IMPLEMENTATIONS", {**build_modes.IMPLEMENTATIONS, entry.mode: Throwaway}
    )
    return extended.THROWAWAY


def test_a_throwaway_mode_is_planned_by_auto_where_admitted(cat, throwaway):
    p = plan(cat, "msgspec", "glide-ffi")
    st = p.stage("msgspec")
    assert st.mode == "throwaway" and st.mode_reason == "auto: python-wheel thrown away on x86_64"
    assert st.platform == X86.platform and not st.emulated
    assert st.env["RVPORT_MODE"] == "throwaway" and "QEMU_CPU" not in st.env
    assert p.stage("glide-ffi").mode is Mode.CROSS  # a kind it does not serve
    assert [s["mode"] for s in p.to_json()["stages"]] == ["throwaway", "cross"]
    assert plan(cat, "msgspec", host=RV).stage("msgspec").mode is Mode.NATIVE  # a host it does not run on


def test_a_throwaway_mode_is_taken_or_refused_on_request(cat, throwaway):
    st = plan(cat, "msgspec", mode=throwaway).stage("msgspec")
    assert st.mode == "throwaway" and st.mode_reason == "requested: thrown away on linux/amd64"
    with pytest.raises(UsageError) as e:
        plan(cat, "glide-ffi", mode=throwaway)
    assert (
        "cannot be thrown away" in str(e.value)
        and e.value.hint == "the throwaway mode is for python-wheel recipes"
    )


def test_a_throwaway_mode_is_dispatched_to_its_class(cat, throwaway):
    st = plan(cat, "msgspec").stage("msgspec")
    impl = build_modes.of(st.mode)
    assert type(impl) is Throwaway
    assert build_modes.bases(st, X86) == (
        (st.recipe.toolchain.base, RISCV64),
        ("debian-trixie-xtc", X86.platform),
    )


def test_a_throwaway_mode_reaches_the_help_and_the_kinds_table(throwaway):
    assert "throwaway (a test's)" in modes.help_text()
    assert modes.choices()[-1] == "throwaway"
    assert "throwaway" in KINDS[Kind.PYTHON_WHEEL].modes and "throwaway" not in KINDS[Kind.GO_BINARY].modes


def test_a_mode_using_a_base_the_registry_does_not_name_is_a_bug(cat, throwaway, monkeypatch):
    entry = modes.MODES[throwaway]
    monkeypatch.setitem(modes.MODES, throwaway, ModeFacts(**{**vars(entry), "bases": ()}))
    st = plan(cat, "msgspec").stage("msgspec")
    with pytest.raises(AssertionError, match="beyond the registry"):
        build_modes.bases(st, X86)
