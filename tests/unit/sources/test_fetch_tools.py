"""`rvport fetch` of a wheel recipe also fetches rvport's own tools (auditwheel, which wheel stages run), so a
mirror it fills serves an offline build whole; a recipe of another kind fetches its sources only. No network:
the tool list is replaced by one tool on a local simple index (PIP_INDEX_URL), the rest is rvport's own path
(index page, sdist, digest, cache, mirror). The real tools are fetched from the package index by the
integration tests (tests/integration/conftest.py: offline_mirror)."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rvport.catalogue import tools as tools_mod
from rvport.catalogue.model import Source, SourceKind
from tests.fixtures.httpserver import Route, serve

TOOL = b"not really an sdist, but pinned by its digest\n" * 50
SRC = b"the recipe's own source\n" * 50


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def recipe(root: Path, kind: str, url: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "demo.yaml").write_text(
        textwrap.dedent(f"""\
        schema: 1
        name: demo
        kind: {kind}
        build: [make]
        versions:
          - version: "1.0"
            sources:
              - name: sdist
                url: {url}
                sha256: {sha(SRC)}
        """)
    )
    return root


@pytest.mark.parametrize("kind,with_tool", [("python-wheel", True), ("go-binary", False)])
def test_fetch_to_a_mirror_adds_the_tools_for_wheel_recipes_only(tmp_path, monkeypatch, kind, with_tool):
    import rvport.cli.source_verbs as cli_sources
    from rvport.cli.app import app

    page = f'<a href="/files/demotool-1.0.tar.gz#sha256={sha(TOOL)}">demotool-1.0.tar.gz</a>'.encode()
    routes = {
        "/simple/demotool/": Route(body=page, content_type="text/html"),
        "/files/demotool-1.0.tar.gz": Route(body=TOOL),
        "/demo-1.0.tar.gz": Route(body=SRC),
    }
    with serve(routes) as srv:
        tool = tools_mod.Tool(
            name="demotool",
            source=Source(
                name="demotool", kind=SourceKind.PYPI, project="demotool", version="1.0", sha256=sha(TOOL)
            ),
            debian=(),
            script="none.sh",
            script_sha256="0" * 64,
        )
        monkeypatch.setattr(cli_sources, "tools", lambda: {"demotool": tool})
        monkeypatch.setenv("PIP_INDEX_URL", srv.url("/simple/"))
        monkeypatch.setenv("COLUMNS", "300")
        root = recipe(tmp_path / "recipes", kind, srv.url("/demo-1.0.tar.gz"))
        mirror = tmp_path / "mirror"
        args = [
            "fetch",
            "demo",
            "--recipes",
            str(root),
            "--cache-dir",
            str(tmp_path / "c"),
            "--to",
            str(mirror),
        ]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        assert srv.hits("/files/demotool-1.0.tar.gz") == (1 if with_tool else 0)
    assert (mirror / "demo-1.0.tar.gz").read_bytes() == SRC
    assert ((mirror / "demotool-1.0.tar.gz").is_file()) is with_tool
    if with_tool:
        assert (mirror / "demotool-1.0.tar.gz").read_bytes() == TOOL and "rvport tool demotool" in res.output


WHEEL = b"a test wheel's bytes, pinned by their digest\n" * 40


def test_fetch_adds_the_test_wheels_of_a_recipes_tests(tmp_path, monkeypatch):
    """`tests: wheels:` are fetched with the sources (checked by sha256), so a mirror serves the tests too."""
    import rvport.cli.source_verbs as cli_sources
    from rvport.cli.app import app

    name = "demotest-1.0-py3-none-any.whl"
    page = f'<a href="/files/{name}#sha256={sha(WHEEL)}">{name}</a>'.encode()
    routes = {
        "/simple/demotest/": Route(body=page, content_type="text/html"),
        f"/files/{name}": Route(body=WHEEL),
        "/demo-1.0.tar.gz": Route(body=SRC),
    }
    with serve(routes) as srv:
        monkeypatch.setattr(cli_sources, "tools", lambda: {})
        monkeypatch.setenv("PIP_INDEX_URL", srv.url("/simple/"))
        monkeypatch.setenv("COLUMNS", "300")
        root = recipe(tmp_path / "recipes", "python-wheel", srv.url("/demo-1.0.tar.gz"))
        text = (root / "demo.yaml").read_text()
        (root / "demo.yaml").write_text(
            text.replace("build: [make]\n", "build: [make]\nsmoke: {script: print(1)}\n")
            + f"    tests:\n      files: [{{path: tests/test_a.py}}]\n"
            f"      wheels: [{{file: {name}, sha256: {sha(WHEEL)}}}]\n"
        )
        mirror = tmp_path / "mirror"
        args = [
            "fetch",
            "demo",
            "--recipes",
            str(root),
            "--cache-dir",
            str(tmp_path / "c"),
            "--to",
            str(mirror),
        ]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        assert srv.hits(f"/files/{name}") == 1
    assert (mirror / name).read_bytes() == WHEEL and "demo==1.0 tests" in res.output
