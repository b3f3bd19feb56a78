"""The closure lock (rvport.catalogue.closure_lock, rvport.closure.resolve): the target's tags and markers,
the shipped vllm lock, a lock edited by hand (digest), a lock whose pins conflict, the resolver over a fake
index and a fake Debian index (no network), and `rvport plan` showing the lock and refusing a bad one."""

from __future__ import annotations

import copy
import json
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from rvport import resources
from rvport.catalogue import closure_lock
from rvport.catalogue.closure_lock import Origin, Target
from rvport.errors import ExitCode, IntegrityError, RecipeError, SourceUnavailable
from tests.fixtures.cli import rvport_process
from tests.fixtures.schemas import validate

SID = Target(python="3.14", python_full="3.14.9", glibc="2.43", base="debian-sid", suite="sid")
SHIPPED = resources.builtin("locks", "vllm-0.33.0-cp314.yaml")


# ---------------------------------------------------------------------------------------------- the target
def test_every_older_manylinux_tag_fits_as_pip_would_not_expand_them():
    plats = SID.platforms()
    assert plats[0] == "manylinux_2_43_riscv64" and "manylinux_2_31_riscv64" in plats
    assert plats[-1] == "linux_riscv64"
    fits = SID.wheel_fits
    assert fits("tokenizers-0.23.3-cp310-abi3-manylinux_2_31_riscv64.whl") is not None
    assert fits("regex-1-cp314-cp314-manylinux_2_31_riscv64.manylinux_2_39_riscv64.whl") is not None
    assert fits("x-1-py3-none-any.whl") is not None
    assert fits("x-1-cp314-cp314-manylinux_2_31_riscv64.whl") < fits("x-1-py3-none-any.whl")  # native first
    for wrong in (
        "tokenizers-0.23.3-cp310-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "tokenizers-0.23.3-cp314-cp314t-manylinux_2_31_riscv64.whl",  # free-threaded
        "x-1-cp313-cp313-manylinux_2_31_riscv64.whl",
        "x-1-cp314-cp314-manylinux_2_44_riscv64.whl",  # newer glibc than sid's
        "x-1-cp314-cp314-musllinux_1_2_riscv64.whl",
        "not-a-wheel.tar.gz",
    ):
        assert fits(wrong) is None, wrong


def test_markers_are_the_targets_not_the_hosts():
    assert closure_lock.applicable('torch==2.14.0; platform_machine == "riscv64"', SID) is not None
    assert closure_lock.applicable('torchvision; platform_machine != "riscv64"', SID) is None
    assert closure_lock.applicable('six>=1.16; python_version > "3.11"', SID) is not None
    assert str(closure_lock.applicable('a>1; python_full_version >= "3.14.9"', SID)) == "a>1"
    assert closure_lock.applicable('b; extra == "image"', SID) is None
    assert closure_lock.applicable('b; extra == "image"', SID, ["image"]) is not None
    with pytest.raises(ValueError, match="is not a requirement"):
        closure_lock.applicable("not a requirement !!", SID)


@pytest.mark.parametrize(
    "deb,py",
    [
        ("2.14.1+dfsg-1", "2.14.1"),
        ("1:2.4.6+ds-5+b1", "2.4.6"),
        ("0.23.0+ds1-1", "0.23.0"),
        ("1.0~rc1-2", "1.0"),
    ],
)
def test_the_python_version_of_a_debian_version(deb, py):
    assert closure_lock.debian_python_version(deb) == py


# ------------------------------------------------------------------------------------------ the shipped lock
def test_the_shipped_vllm_lock_holds_together_and_gives_every_name_one_origin():
    lock = closure_lock.load_lock(SHIPPED)
    doc = yaml.safe_load(SHIPPED.read_text())
    validate(doc, json.loads(resources.schema_text("closure-lock")))
    assert lock.digest == closure_lock.digest_of(doc)
    counts = lock.counts()
    assert sum(counts.values()) == len(lock.entries) and len({e.name for e in lock.entries}) == len(
        lock.entries
    )
    assert counts["recipe"] == 9 and counts["debian"] > 10 and counts["pypi"] > 50
    assert {e.recipe for e in lock.by_origin(Origin.RECIPE)} == {
        "vllm",
        "msgspec",
        "sentencepiece",
        "tiktoken",
        "oss-harmony",
        "xgrammar",  # imported by `from vllm import LLM` although vLLM's marker leaves it out on riscv64
        "apache-tvm-ffi",  # xgrammar's
        "outlines-core",  # the outlines structured-output backend (issue 37): no longer dropped
        "llguidance",  # the guidance backend, added as xgrammar was (its marker leaves out riscv64)
    }
    assert "xgrammar==0.2.8" in lock.entry("vllm").requires
    assert {"outlines_core==0.2.14", "llguidance<1.8.0,>=1.7.0"} <= set(lock.entry("vllm").requires)
    assert not any(e.get("line") == "outlines_core == 0.2.14" for e in lock.edits)
    assert {"with": "llguidance >= 1.7.0, < 1.8.0"}.items() <= [e for e in lock.edits if "line" not in e][
        1
    ].items()
    assert {"with": "xgrammar == 0.2.8"}.items() <= next(e for e in lock.edits if "line" not in e).items()
    torch = lock.entry("torch")
    assert torch.origin is Origin.DEBIAN and torch.debian.package == "python3-torch"
    assert torch.debian.version == "2.14.1+dfsg-1"
    from rvport.catalogue.recipes import load_catalogue

    assert closure_lock.check_recipe_pins(lock, load_catalogue().resolve("vllm").toolchain.pins) == []
    # the facts of issue 25: these come from the index as pure wheels, whatever Debian has
    for name in (
        "transformers",
        "huggingface-hub",
        "protobuf",
        "fastapi",
        "mcp",
        "lark",
        "compressed-tensors",
    ):
        e = lock.entry(name)
        assert e.origin is Origin.PYPI and closure_lock.is_pure(e.wheel), name
    # and these as riscv64 wheels whose manylinux_2_31 tag pip would not take for manylinux_2_39
    for name in ("tokenizers", "safetensors", "blake3", "jiter", "pybase64", "rpds-py"):
        assert "manylinux_2_31_riscv64" in lock.entry(name).wheel, name
    assert lock.entry("transformers").version.startswith("5.")
    for e in lock.by_origin(Origin.PYPI):
        assert len(e.sha256) == 64 and SID.wheel_fits(e.wheel) is not None


def _edited(tmp_path: Path, edit, *, redigest: bool) -> Path:
    doc = yaml.safe_load(SHIPPED.read_text())
    edit(doc)
    if redigest:
        doc["digest"] = closure_lock.digest_of(doc)
    out = tmp_path / SHIPPED.name
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def _entry(doc: dict, name: str) -> dict:
    return next(p for p in doc["packages"] if p["name"] == name)


def test_a_lock_edited_by_hand_is_refused_by_its_digest(tmp_path):
    path = _edited(tmp_path, lambda d: _entry(d, "aiohttp").update(sha256="0" * 64), redigest=False)
    with pytest.raises(IntegrityError, match="was changed after it was made") as ei:
        closure_lock.load_lock(path)
    assert ei.value.exit_code == ExitCode.INTEGRITY and "rvport lock" in ei.value.hint


def test_a_pin_that_conflicts_is_refused_naming_the_requirement(tmp_path):
    def older_transformers(d):
        e = _entry(d, "transformers")
        e.update(version="5.12.1", wheel="transformers-5.12.1-py3-none-any.whl")

    with pytest.raises(closure_lock.LockConflict) as ei:
        closure_lock.load_lock(_edited(tmp_path, older_transformers, redigest=True))
    assert ei.value.exit_code == ExitCode.RECIPE_INVALID
    text = ei.value.render()
    assert "vllm 0.33.0 requires transformers<5.21.0,>=5.16.1; the lock has transformers 5.12.1" in text


def test_a_lock_missing_a_requirement_or_holding_a_name_twice_is_refused(tmp_path):
    def drop_regex(d):
        d["packages"] = [p for p in d["packages"] if p["name"] != "regex"]

    with pytest.raises(closure_lock.LockConflict, match="does not hold together") as ei:
        closure_lock.load_lock(_edited(tmp_path, drop_regex, redigest=True))
    assert "requires regex, which the lock does not hold" in ei.value.render()

    def twice(d):
        d["packages"].append(copy.deepcopy(_entry(d, "six")))

    with pytest.raises(closure_lock.LockConflict) as ei:
        closure_lock.load_lock(_edited(tmp_path, twice, redigest=True))
    assert "six is locked twice" in ei.value.render()

    def x86(d):
        e = _entry(d, "regex")
        e["wheel"] = e["wheel"].replace("riscv64", "x86_64")

    with pytest.raises(closure_lock.LockConflict) as ei:
        closure_lock.load_lock(_edited(tmp_path, x86, redigest=True))
    assert "does not fit cp314 Linux riscv64" in ei.value.render()


def test_a_lock_that_is_no_lock_is_a_recipe_error(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("schema: 1\nkind: rvport-closure-lock\n")
    with pytest.raises(RecipeError, match="is not valid"):
        closure_lock.load_lock(path)


def test_a_lock_whose_debian_torch_is_not_the_recipes_pin_conflicts(tmp_path):
    from rvport.catalogue.recipes import load_catalogue

    def other_torch(d):
        _entry(d, "torch")["debian"]["sha256"] = "1" * 64

    lock = closure_lock.load_lock(_edited(tmp_path, other_torch, redigest=True))
    problems = closure_lock.check_recipe_pins(lock, load_catalogue().resolve("vllm").toolchain.pins)
    assert len(problems) == 1 and "the recipe is built against 2.14.1+dfsg-1" in problems[0].message


# ----------------------------------------------------------------------------------------------- rvport plan
def _locks_dir(tmp_path: Path, lock: Path | None = None) -> Path:
    d = tmp_path / "locks"
    d.mkdir(exist_ok=True)
    for f in resources.builtin("locks").iterdir():
        shutil.copy(f, d / f.name)
    if lock is not None:
        shutil.copy(lock, d / SHIPPED.name)
    return d


def test_plan_shows_the_lock_digest_and_counts_in_plan_json(tmp_path):
    cp = rvport_process(["plan", "vllm", "--output", str(tmp_path / "out")])
    assert cp.returncode == 0, cp.stderr
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    validate(doc, json.loads(resources.schema_text("plan")))
    (c,) = doc["closures"]
    lock = closure_lock.load_lock(SHIPPED)
    assert c["digest"] == lock.digest and c["counts"] == lock.counts() and c["stage"] == "vllm"
    assert "python3-torch=2.14.1+dfsg-1" in c["debian"]
    assert f"closure lock of vllm (cp314): {len(lock.entries)} distributions" in cp.stdout
    # what the closure leaves out is named with its count: the edits without a replacement
    assert lock.dropped() == ["numba == 0.65.0", "opencv-python-headless >= 4.13.0"]
    said = "leaves out 2 of vllm's requirements: numba == 0.65.0, opencv-python-headless >= 4.13.0"
    assert said in " ".join(cp.stdout.split()), cp.stdout  # as the terminal's width wraps it
    cp = rvport_process(["plan", "msgspec", "--output", str(tmp_path / "m")])
    assert "closures" not in json.loads((tmp_path / "m" / "plan.json").read_text())


@pytest.mark.parametrize(
    "edit,redigest,code,words",
    [
        (lambda d: _entry(d, "six").update(sha256="0" * 64), False, 4, "was changed after it was made"),
        (
            lambda d: _entry(d, "lark").update(version="1.3.0", wheel="lark-1.3.0-py3-none-any.whl"),
            True,
            3,
            "requires lark==1.2.2",
        ),
    ],
)
def test_plan_refuses_a_bad_lock_with_its_exit_code_and_writes_no_plan(tmp_path, edit, redigest, code, words):
    locks = _locks_dir(tmp_path, _edited(tmp_path, edit, redigest=redigest))
    env = {**__import__("os").environ, "RVPORT_LOCKS": str(locks)}
    cp = rvport_process(["plan", "vllm", "--output", str(tmp_path / "out")], env=env)
    assert cp.returncode == code, cp.stderr
    assert words in cp.stderr and "rvport lock" in cp.stderr and "Traceback" not in cp.stderr
    assert not (tmp_path / "out" / "plan.json").exists()


# ------------------------------------------------------------------------------------------------ resolver
def _wheel(dirpath: Path, filename: str, requires: list[str]) -> Path:
    name, version = filename.split("-")[:2]
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    path = dirpath / filename
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}-{version}.dist-info/METADATA", meta)
    return path


class FakeIndex:
    """files() and download() of resolve.Index, over wheels made in a directory."""

    def __init__(self, root: Path, wheels: dict[str, list[str]]):
        from rvport.sources.pypi import IndexFile

        self.paths = {f: _wheel(root, f, reqs) for f, reqs in wheels.items()}
        self.entries = [
            IndexFile(filename=f, url=f"http://127.0.0.1:1/{f}", sha256="a" * 64, index="test")
            for f in wheels
        ]
        self.downloads: list[str] = []

    def files(self, name):
        from packaging.utils import canonicalize_name, parse_wheel_filename

        out = [f for f in self.entries if parse_wheel_filename(f.filename)[0] == canonicalize_name(name)]
        if not out:
            raise SourceUnavailable(f"the package index has no files of {name}")
        return out

    def download(self, name, version, f):
        self.downloads.append(f.filename)
        return self.paths[f.filename]


def _lock_index(urls, session=None):
    """resolve.Index over the given index URLs, with a session of its own (no Fetcher, no cache)."""
    from types import SimpleNamespace

    import requests

    from rvport.closure.resolve import Index
    from rvport.sources.pypi import IndexConfig

    config = IndexConfig(index_url=urls[0], extra_index_urls=tuple(urls[1:]), origin="test")
    return Index(SimpleNamespace(session=session or requests.Session(), index=config))


def test_the_lock_s_index_reads_every_index_s_page_through_the_sources_reader():
    from tests.fixtures.httpserver import Route, serve, simple_index_html

    doc = {
        "files": [
            {
                "filename": "demo-1.0-py3-none-any.whl",
                "url": "d1.whl",
                "hashes": {"sha256": "1" * 64},
                "requires-python": ">=3.15",
                "yanked": True,
            }
        ]
    }
    routes = {
        "/one/demo/": Route(
            body=json.dumps(doc).encode(), content_type="application/vnd.pypi.simple.v1+json"
        ),
        "/two/demo/": Route(
            body=simple_index_html(
                {"demo-2.0-py3-none-any.whl": "/f/demo-2.0-py3-none-any.whl#sha256=" + "2" * 64}
            ),
            content_type="text/html",
        ),
    }
    with serve(routes) as srv:
        idx = _lock_index([srv.url("/one/"), srv.url("/missing/"), srv.url("/two/")])
        files = idx.files("Demo")
        assert idx.files("demo") is files and srv.hits("/one/demo/") == 1  # read once a run
    assert [(f.filename, f.sha256, f.requires_python, f.yanked, f.index) for f in files] == [
        ("demo-1.0-py3-none-any.whl", "1" * 64, ">=3.15", True, srv.url("/one/")),
        ("demo-2.0-py3-none-any.whl", "2" * 64, None, False, srv.url("/two/")),
    ]
    assert files[1].url == srv.url("/f/demo-2.0-py3-none-any.whl")


def test_the_lock_s_index_names_every_miss_and_a_page_over_the_cap_is_one(monkeypatch):
    from rvport.sources import pypi
    from tests.fixtures.httpserver import Route, serve, simple_index_html

    monkeypatch.setattr(pypi, "MAX_PAGE", 4096)
    big = simple_index_html({f"demo-1.{i}-py3-none-any.whl": f"d{i}.whl" for i in range(200)})
    routes = {
        "/big/demo/": Route(body=big, content_type="text/html"),
        "/bad/demo/": Route(body=b"{not json", content_type="application/vnd.pypi.simple.v1+json"),
    }
    with serve(routes) as srv:
        idx = _lock_index([srv.url("/big/"), srv.url("/bad/"), srv.url("/missing/")])
        with pytest.raises(SourceUnavailable, match="no files of demo") as e:
            idx.files("demo")
    assert "its project page is over 4096 bytes" in e.value.message
    assert "its project page cannot be read (JSONDecodeError)" in e.value.message
    assert "/missing/: HTTP 404" in e.value.message


def test_a_tls_failure_while_locking_is_an_error_with_the_ca_bundle_remedy():
    import requests

    class Refusing:
        def get(self, url, **kw):
            raise requests.exceptions.SSLError("certificate verify failed")

    idx = _lock_index(["https://127.0.0.1:9/simple/"], session=Refusing())
    with pytest.raises(SourceUnavailable, match="TLS verification failed for the index") as e:
        idx.files("demo")
    assert e.value.exit_code == ExitCode.SOURCE_UNAVAILABLE and "--ca-bundle" in (e.value.hint or "")


def _policy(**kw):
    from rvport.closure.resolve import Policy

    base = dict(
        recipe="app",
        requirements=("requirements.txt",),
        replace=(),
        recipes={"app": "app"},
        recipe_versions={},
        debian=frozenset(),
        debian_names={},
        not_distributions=frozenset(),
    )
    return Policy(**{**base, **kw})


def _deb(name, version, depends=""):
    from rvport.sources.debarchive import DebPackage

    return DebPackage(
        name=name,
        version=version,
        architecture="riscv64",
        filename=f"pool/{name}.deb",
        size=1,
        sha256="d" * 64,
        depends=depends,
    )


def _resolve(tmp_path, wheels, root, *, packages=None, **policy):
    from packaging.requirements import Requirement

    from rvport.closure.resolve import Resolver

    idx = FakeIndex(tmp_path, wheels)
    r = Resolver(
        policy=_policy(**policy),
        target=SID,
        index=idx,
        debian=packages or {},
        recipe_versions={"app": "1.0"},
        root_requires=lambda extras: [Requirement(x) for x in root],
    )
    return r.run(), idx


def test_the_resolver_takes_the_newest_fitting_wheel_and_starts_again_when_a_later_requirement_rules_it_out(
    tmp_path,
):
    nodes, idx = _resolve(
        tmp_path,
        {
            "a-2.0-cp314-cp314-manylinux_2_31_riscv64.whl": [],
            "a-3.0-cp314-cp314-manylinux_2_17_x86_64.whl": [],  # newer, but not for riscv64
            "a-1.0-py3-none-any.whl": [],
            "b-1.0-py3-none-any.whl": ["a<2", 'c; platform_machine == "x86_64"', 'd; extra == "x"'],
        },
        ["a", "b"],
    )
    assert {n: (v.version, v.origin.value) for n, v in nodes.items()} == {
        "app": ("1.0", "recipe"),
        "a": ("1.0", "pypi"),
        "b": ("1.0", "pypi"),
    }
    assert nodes["a"].wheel == "a-1.0-py3-none-any.whl"
    assert "a-2.0-cp314-cp314-manylinux_2_31_riscv64.whl" in idx.downloads  # chosen first, then ruled out
    assert "a-3.0-cp314-cp314-manylinux_2_17_x86_64.whl" not in idx.downloads


def test_debian_names_follow_their_depends_and_a_conflicting_one_is_shadowed_by_the_index(tmp_path):
    torch_depends = "python3-numpy, python3-filelock (>= 3), libc6, python3-supported-min (<< 3.15)"
    debian = {
        "python3-numpy": (_deb("python3-numpy", "1:2.4.6+ds-5"),),
        "python3-torch": (_deb("python3-torch", "2.14.1+dfsg-1", torch_depends),),
        "python3-filelock": (_deb("python3-filelock", "3.0.0-1"),),
        "python3-supported-min": (),
    }
    nodes, _ = _resolve(
        tmp_path,
        {"filelock-3.20.3-py3-none-any.whl": []},
        ["torch==2.14.*", "filelock>=3.20"],
        packages=debian,
        debian=frozenset({"torch"}),
    )
    assert nodes["torch"].origin is Origin.DEBIAN and nodes["torch"].version == "2.14.1"
    assert nodes["numpy"].origin is Origin.DEBIAN  # a Depends of torch: apt installs it
    assert nodes["filelock"].origin is Origin.PYPI and nodes["filelock"].shadows.version == "3.0.0-1"
    assert "supported-min" not in nodes  # a virtual package is no distribution


def test_what_a_debian_packages_own_metadata_requires_is_met_and_shadows_a_debian_version_it_rules_out(
    tmp_path,
):
    """Debian's sympy depends on python3-mpmath with no version, but its dist-info asks mpmath < 1.4, which
    pip reads in a venv that sees Debian's packages: the policy's debian_requires makes the closure meet it,
    with the index's mpmath installed over Debian's 1.4.1, and adds what the Depends leave out (tzdata)."""
    debian = {
        "python3-sympy": (_deb("python3-sympy", "1.14.0-6", "python3-mpmath"),),
        "python3-mpmath": (_deb("python3-mpmath", "1.4.1-1"),),
        "python3-dateutil": (_deb("python3-dateutil", "3.0.0-1"),),
    }
    wheels = {"mpmath-1.3.0-py3-none-any.whl": [], "tzdata-2026.6-py2.py3-none-any.whl": []}
    names = {"python-dateutil": "python3-dateutil"}
    plain, _ = _resolve(
        tmp_path,
        wheels,
        ["sympy", "python-dateutil"],
        packages=debian,
        debian=frozenset({"sympy", "python-dateutil"}),
        debian_names=names,
    )
    assert plain["mpmath"].origin is Origin.DEBIAN and "tzdata" not in plain  # the Depends alone
    nodes, _ = _resolve(
        tmp_path,
        wheels,
        ["sympy", "python-dateutil"],
        packages=debian,
        debian=frozenset({"sympy", "python-dateutil"}),
        debian_names=names,
        debian_requires={"sympy": ("mpmath>=1.1.0,<1.4",), "python-dateutil": ("tzdata",)},
    )
    assert nodes["sympy"].origin is Origin.DEBIAN
    assert nodes["mpmath"].origin is Origin.PYPI and nodes["mpmath"].version == "1.3.0"
    assert nodes["mpmath"].shadows.package == "python3-mpmath"
    assert nodes["tzdata"].origin is Origin.PYPI


def test_a_policy_debian_requires_that_is_no_requirement_is_a_recipe_error(tmp_path):
    import shutil

    from rvport.catalogue.closure_lock import locks_dir
    from rvport.closure.resolve import load_policy

    for f in ("vllm.policy.yaml", "debian-names.yaml"):
        shutil.copy(locks_dir() / f, tmp_path / f)
    policy = tmp_path / "vllm.policy.yaml"
    policy.write_text(policy.read_text().replace('["mpmath>=1.1.0,<1.4"]', '["mpmath >> 1"]'))
    with pytest.raises(RecipeError, match="is not a closure policy") as ei:
        load_policy("vllm", tmp_path)
    assert "debian_requires" in (ei.value.hint or "")


def test_a_policy_debian_name_whose_version_conflicts_is_a_lock_conflict(tmp_path):
    debian = {"python3-numpy": (_deb("python3-numpy", "1:1.26.0-1"),)}
    with pytest.raises(closure_lock.LockConflict, match="the policy takes numpy from Debian"):
        _resolve(tmp_path, {}, ["numpy>=2"], packages=debian, debian=frozenset({"numpy"}))


def test_every_name_without_a_fitting_wheel_is_named_with_what_the_index_has_and_who_requires_it(tmp_path):
    wheels = {
        "numba-0.65.0-cp314-cp314-manylinux_2_28_x86_64.whl": [],
        "mc-1.0-py3-none-any.whl": ["opencv-python-headless>=4"],
        "opencv_python_headless-4.13.0-cp37-abi3-manylinux_2_28_aarch64.whl": [],
    }
    with pytest.raises(SourceUnavailable, match="2 distribution.s. that no origin gives") as ei:
        _resolve(tmp_path, wheels, ["numba==0.65.0", "mc"])
    text = ei.value.render()
    assert "no version of numba satisfies numba==0.65.0" in text and "newest on the index: 0.65.0" in text
    assert "opencv-python-headless>=4 with a wheel" in text and "(required by mc 1.0)" in text


def test_requirements_files_with_includes_and_the_recipes_edits(tmp_path):
    from rvport.closure.resolve import requirements_lines

    files = {
        "requirements/cpu.txt": "-r common.txt\ntorch==2.14.0; platform_machine == 'riscv64'  # riscv\n",
        "requirements/common.txt": "regex # fast\n\nnumba == 0.65.0\nmistral_common[image] >= 1.11.6\n",
    }
    edits = [
        ("torch==2.14.0", "torch==2.14.*", "debian"),
        ("numba == 0.65.0", None, "no wheel"),
        ("mistral_common[image] >= 1.11.6", "mistral_common >= 1.11.6", "opencv"),
    ]
    edits.append((None, "xgrammar == 0.2.8", "imported anyway"))
    lines = requirements_lines(files.__getitem__, "requirements/cpu.txt", edits)
    assert lines == [
        "regex",
        "mistral_common >= 1.11.6",
        "torch==2.14.*; platform_machine == 'riscv64'",
        "xgrammar == 0.2.8",
    ]
    with pytest.raises(RecipeError, match="does not have"):
        requirements_lines(files.__getitem__, "requirements/cpu.txt", [("gone == 1", None, "x")])


def test_the_vllm_recipe_edits_its_requirements_as_the_lock_policy_says(tmp_path):
    """vllm.yaml's build edits the sdist's requirement files that become the wheel's Requires-Dist; the lock
    is resolved from the same files with the policy's `replace` list. Run the recipe's edit command on files
    that hold every line the policy edits (with markers and comments, as the sdist writes them) and the
    lines it keeps: what the wheel would require must be what the lock resolved."""
    import subprocess
    import sys

    from rvport.catalogue.recipes import load_catalogue
    from rvport.closure.resolve import load_policy, requirements_lines

    policy = load_policy("vllm")
    commands = [c for c in load_catalogue().resolve("vllm").build if "<<'EDITS'" in c]
    assert len(commands) == 1, "vllm.yaml's build has one requirement edit command"
    script = commands[0].split("<<'EDITS'\n", 1)[1].rsplit("EDITS", 1)[0]

    req = tmp_path / "requirements"
    req.mkdir()
    edited = [line for line, _new, _why in policy.replace if line is not None]
    common = ["# Common", "regex  # kept", "msgspec", "lark == 1.2.2"]
    marked = "; platform_machine != 's390x'  # why"
    common += [f"{line}{marked}" if i % 2 else line for i, line in enumerate(edited)]
    (req / "common.txt").write_text("\n".join(common) + "\n")
    (req / "cpu.txt").write_text("-r common.txt\n\nsetuptools==78.1.1 # a comment\n")
    subprocess.run([sys.executable, "-"], input=script, text=True, cwd=tmp_path, check=True)

    def read(rel: str) -> str:
        return (tmp_path / rel).read_text()

    wheel = requirements_lines(read, "requirements/cpu.txt", ())
    (req / "common.txt").write_text("\n".join(common) + "\n")
    (req / "cpu.txt").write_text("-r common.txt\n\nsetuptools==78.1.1 # a comment\n")
    lock = requirements_lines(read, "requirements/cpu.txt", policy.replace)
    assert sorted(wheel) == sorted(lock)

    # an sdist without one of the edited lines fails the build, not the wheel's metadata
    (req / "common.txt").write_text("regex\n")
    failed = subprocess.run([sys.executable, "-"], input=script, text=True, cwd=tmp_path, capture_output=True)
    assert failed.returncode != 0 and "requirement lines not in the sdist" in failed.stderr


def test_an_sdist_is_read_as_the_compression_its_name_says(tmp_path):
    import io
    import tarfile

    from rvport.closure.resolve import sdist_member
    from rvport.errors import IntegrityError

    def sdist(compression: str) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode=f"w:{compression}") as t:
            data = b"Metadata-Version: 2.2\nName: x\n"
            info = tarfile.TarInfo("x-1.0/PKG-INFO")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_bytes(sdist("gz"))
    bad.write_bytes(sdist("xz"))
    assert "Name: x" in sdist_member(good, "PKG-INFO", "x-1.0.tar.gz")
    with pytest.raises(IntegrityError, match="the sdist cannot be read"):
        sdist_member(bad, "PKG-INFO", "x-1.0.tar.gz")  # an xz tar named .tar.gz: not sniffed
    with pytest.raises(IntegrityError, match="declares no tar archive"):
        sdist_member(good, "PKG-INFO", "x-1.0.zip")
