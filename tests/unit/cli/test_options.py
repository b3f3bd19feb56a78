"""Each verb's options value (rvport/cli/options.py) is a static, frozen, keyword-only dataclass checked
against the settings table (rvport/cli/settings.py), as mkosi checks its Config against its SETTINGS: every
setting of the verb is a field of the setting's type and default, and no field lacks a setting. The options
of the layers below are built from it by one function each (rvport/cli/handoff.py)."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from rvport.cli import handoff, options, settings


def _fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def test_every_verb_has_one_options_value_and_every_value_a_verb():
    assert set(options.ARGS) == set(settings.VERBS)
    assert len(set(options.ARGS.values())) == len(options.ARGS)


@pytest.mark.parametrize("verb", settings.VERBS)
def test_the_options_value_is_the_table_s(verb):
    """A setting with no field, a field with no setting, or a field whose type or default drifted from the
    setting's, fails."""
    cls = options.ARGS[verb]
    where = verb or "rvport"
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, where  # type: ignore[attr-defined]
    fields = _fields(cls)
    table = {s.dest: s for s in settings.settings_of(verb)}
    assert set(fields) == set(table), f"{where}: fields {sorted(fields)} against settings {sorted(table)}"
    hints = typing.get_type_hints(cls)
    for name, f in fields.items():
        s = table[name]
        assert f.kw_only, f"{where} {name}: not keyword-only"
        want = settings._value_type(s.type)
        assert hints[name] == want, f"{where} {name}: {hints[name]} against the table's {want}"
        if s.required:
            assert f.default is dataclasses.MISSING, f"{where} {name}: required, so no default"
        else:
            default = () if want is not s.type else s.default
            assert f.default == default, f"{where} {name}: default {f.default!r} against {default!r}"


@pytest.mark.parametrize("verb", settings.VERBS)
def test_a_class_constant_never_stands_for_a_setting(verb):
    """What a verb has no setting for is a ClassVar; a ClassVar named as one of the verb's settings would hide
    the command line's value."""
    cls = options.ARGS[verb]
    constants = {n for n, t in typing.get_type_hints(cls).items() if typing.get_origin(t) is typing.ClassVar}
    assert not constants & {s.dest for s in settings.settings_of(verb)}, verb


@pytest.mark.parametrize("verb", settings.VERBS)
def test_the_options_value_is_frozen_and_keyword_only(verb, tmp_path):
    cls = options.ARGS[verb]
    required = {n: "x" for n, f in _fields(cls).items() if f.default is dataclasses.MISSING}
    o = cls(**required)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(o, dataclasses.fields(cls)[0].name, None)
    with pytest.raises(TypeError):
        cls(*[None])


def test_make_options_gives_the_verb_s_options_value(tmp_path):
    o = settings.make_options("build", {"output": tmp_path / "out", "recipes": ["a"]}, environ={})
    assert type(o) is options.BuildArgs and o.recipes == ("a",) and o.output == tmp_path / "out"
    o = settings.make_options("verify artifacts", {"paths": [tmp_path]}, environ={})
    assert type(o) is options.VerifyArtifactsArgs and o.paths == (tmp_path,) and o.export == ()


def test_make_dataclass_is_gone():
    for path in (Path(settings.__file__).parent).glob("*.py"):
        assert "make_dataclass" not in path.read_text(), path


# ------------------------------------------------------------------------------ what the layers below get
def test_the_request_of_every_verb_that_plans(tmp_path):
    from rvport.plan.planner import Mode

    plan = settings.make_options(
        "plan",
        {"recipes": ["msgspec"], "jobs": 3, "output": tmp_path / "out", "python": ["3.13,3.14"]},
        environ={},
    )
    req = handoff.request(plan)
    assert req.refs == ("msgspec",) and req.jobs == 3 and req.tag == "local" and req.mode is Mode.AUTO
    assert req.pythons == ("3.13", "3.14") and req.profile.name == "rvv256" and not req.all
    rep = settings.make_options("reproduce", {"recipes": ["msgspec"], "output": tmp_path / "out"}, environ={})
    assert handoff.request(rep).tag == "reproduce" and not handoff.request(rep).all
    prep = settings.make_options("prepare", {"all": True, "output": tmp_path / "out"}, environ={})
    req = handoff.request(prep)
    assert req.all and req.jobs is None and req.manylinux == "auto"
    both = settings.make_options(
        "build", {"all": True, "recipes": ["x"], "output": tmp_path / "out"}, environ={}
    )
    with pytest.raises(settings.UsageError, match="give recipe names or --all, not both"):
        handoff.request(both)


def test_the_fetch_options_of_every_verb_that_sources(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    common = {"cache_dir": tmp_path / "c", "mirror": mirror, "offline": True}
    for verb in ("fetch", "pin", "lock", "wheelhouse", "plan", "build", "prepare"):
        values = common | ({"recipe": "msgspec"} if verb in ("pin", "lock", "wheelhouse") else {})
        values |= {"output": tmp_path / "out", "wheelhouse_dir": tmp_path / "wh"} if verb != "fetch" else {}
        fo = handoff.fetch_options(settings.make_options(verb, values, environ={}))
        assert fo.cache.root == tmp_path / "c" and fo.mirror == mirror and fo.offline, verb
        assert fo.fill_mirror is None and fo.git_clones == (), verb
    fo = handoff.fetch_options(settings.make_options("fetch", common | {"to": tmp_path / "m"}, environ={}))
    assert fo.fill_mirror == tmp_path / "m"
    sc = settings.make_options(
        "serve-check",
        {"recipe": "vllm", "wheelhouse": tmp_path, "check_dir": tmp_path / "sc", "cache_dir": tmp_path / "c"},
        environ={},
    )
    assert handoff.fetch_options(sc).mirror is None  # a serving check locates no source
    rep = settings.make_options("reproduce", {"recipes": ["x"], "mirror": mirror}, environ={})
    fo = handoff.fetch_options(rep, cache_dir=tmp_path / "first" / "cache")
    assert fo.cache.root == tmp_path / "first" / "cache" and fo.mirror == mirror


def test_the_run_options_of_every_verb_that_runs_a_plan(tmp_path):
    fetch = handoff.fetch_options(settings.make_options("pin", {"recipe": "x"}, environ={}))
    base = "img@sha256:" + "0" * 64
    values = {
        "output": tmp_path / "out",
        "builder": "b",
        "base_image": base,
        "allow_expired_release": ["sid"],
    }
    plan = settings.make_options("plan", values | {"format": "bake"}, environ={})
    bake = handoff.bake_options(plan, fetch)
    assert (bake.output, bake.builder, bake.base_image, bake.fetch) == (tmp_path / "out", "b", base, fetch)
    assert bake.allow_expired_release == ("sid",)
    prep = handoff.run_options(settings.make_options("prepare", values, environ={}), fetch)
    assert dataclasses.asdict(prep) == dataclasses.asdict(bake)
    build = settings.make_options(
        "build",
        values | {"no_smoke": True, "cache_to": tmp_path / "ct"},
        environ={"RVPORT_BOOTSTRAP": "split"},
    )
    bo = handoff.build_options(build, fetch)
    assert (
        bo.output == tmp_path / "out" and not bo.smoke and not bo.no_cache and bo.cache_to == tmp_path / "ct"
    )
    assert bo.bootstrap == "split" and bo.base_image == base
    rep = settings.make_options("reproduce", {"recipes": ["x"], "builder": "b"}, environ={})
    bo = handoff.build_options(rep, fetch, output=tmp_path / "first")
    assert bo.output == tmp_path / "first" and bo.no_cache and bo.smoke and bo.builder == "b"
    assert bo.tests  # a recipe's upstream tests run by default, after its smoke test
    assert not handoff.build_options(build, fetch).tests  # --no-smoke (above) skips them too
    no_tests = settings.make_options("build", values | {"no_tests": True}, environ={})
    assert handoff.build_options(no_tests, fetch).smoke and not handoff.build_options(no_tests, fetch).tests
    assert bo.base_image is None and bo.cache_to is None and bo.cache_from is None
