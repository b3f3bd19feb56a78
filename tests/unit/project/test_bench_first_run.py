"""bench/first_run.py: the private engine's command line and settings, its network rules, and the step table
read from a result.json (no engine, no root)."""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_first_run", ROOT / "bench" / "first_run.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_the_private_daemon_has_its_own_places_and_config_and_leaves_the_hosts_chains_alone(tmp_path):
    argv = bench.dockerd_argv(tmp_path, "rvb1")
    opt = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert opt["--config-file"] == str(tmp_path / "daemon.json")  # /etc/docker/daemon.json is not read
    assert opt["--data-root"] == str(tmp_path / "data") and opt["--exec-root"] == str(tmp_path / "exec")
    assert opt["--pidfile"] == str(tmp_path / "dockerd.pid") and opt["-H"] == f"unix://{tmp_path}/docker.sock"
    assert opt["--bridge"] == "rvb1" and "--iptables=false" in argv and "--ip6tables=false" in argv


def test_the_private_daemon_takes_how_the_host_stores_and_networks_never_where(tmp_path):
    host = tmp_path / "daemon.json"
    host.write_text(
        json.dumps(
            {
                "data-root": "/var/lib/docker",
                "storage-driver": "fuse-overlayfs",
                "mtu": 1400,
                "hosts": ["unix:///var/run/docker.sock"],
                "log-driver": "json-file",
            }
        )
    )
    assert bench.daemon_settings(host, None) == {"storage-driver": "fuse-overlayfs", "mtu": 1400}
    assert bench.daemon_settings(host, "overlay2") == {"storage-driver": "overlay2", "mtu": 1400}
    assert bench.daemon_settings(tmp_path / "none.json", None) == {}
    host.write_text("{not json")
    assert bench.daemon_settings(host, None) == {}


def test_rules_let_the_bridge_out_and_back_and_name_only_its_subnet():
    rules = bench.nat_rules("rvb1", "10.199.0.0/24")
    assert ["-t", "nat", "POSTROUTING", "-s", "10.199.0.0/24", "!", "-o", "rvb1", "-j", "MASQUERADE"] in rules
    assert all("rvb1" in r for r in rules) and {r[1] for r in rules} == {"filter", "nat"}


def test_a_subnet_the_host_routes_already_is_refused():
    assert bench.free_subnet("10.199.0.0/24", ["172.17.0.0/16", "192.0.2.0/24"]) == ipaddress.ip_network(
        "10.199.0.0/24"
    )
    with pytest.raises(SystemExit, match="overlaps the host's route 10.199.0.128/25"):
        bench.free_subnet("10.199.0.0/24", ["10.199.0.128/25"])


def test_the_engine_environment_points_every_docker_client_at_the_private_daemon(tmp_path):
    eng = bench.PrivateEngine(
        tmp_path, bridge="rvb1", subnet=ipaddress.ip_network("10.199.0.0/24"), settings={}, keep=False
    )
    env = eng.env(
        {
            "DOCKER_HOST": "unix:///var/run/docker.sock",
            "DOCKER_CONTEXT": "remote",
            "PATH": "/bin",
            "BUILDX_BUILDER": "mine",
        }
    )
    assert env == {
        "DOCKER_HOST": f"unix://{tmp_path}/docker.sock",
        "BUILDX_BUILDER": "default",
        "PATH": "/bin",
    }


RESULT = {
    "base_images": {
        "debian-trixie-xtc@linux/amd64": {
            "spec": "debian-trixie-xtc",
            "platform": "linux/amd64",
            "duration_s": 90.0,
            "image_id": "sha256:" + "2" * 64,
        },
        "debian-trixie@linux/riscv64": {
            "spec": "debian-trixie",
            "platform": "linux/riscv64",
            "duration_s": 300.0,
            "image_id": "sha256:" + "1" * 64,
        },
    },
    "stages": [
        {
            "recipe": "msgspec",
            "timings": {
                "fetch": 2.0,
                "base": 390.0,
                "toolchain": 40.0,
                "accelerated": 30.0,
                "build": 60.0,
                "verify": 1.0,
                "smoke": 20.0,
            },
            "images": {
                "base": "sha256:" + "1" * 64,
                "toolchain": "sha256:" + "3" * 64,
                "xtc_tag": "rvport/xtc:x",
            },
        },
        {"recipe": "tiktoken", "timings": {"fetch": 8.0, "toolchain": 50.0, "build": 200.0, "verify": 1.0}},
    ],
}


def test_steps_split_a_run_by_base_image_image_kind_and_wheel_and_the_rest_is_other():
    got = bench.steps(RESULT, verify_wall=5.0, total=1000.0)
    assert list(got)[:2] == ["riscv64 base debian-trixie", "build-platform base debian-trixie-xtc"]
    assert got["riscv64 base debian-trixie"] == 300.0 and got["toolchain images (apt, emulated)"] == 90.0
    assert got["msgspec wheel build"] == 60.0 and got["tiktoken wheel build"] == 200.0
    assert got["accelerated prefix images"] == 30.0 and got["sources (fetch, unpack, vendor)"] == 10.0
    assert got["rvport verify artifacts"] == 5.0
    assert sum(got.values()) == pytest.approx(
        1000.0
    )  # the stage's "base" timing is the bases' own, not added
    assert bench.image_ids(RESULT) == {"sha256:" + c * 64 for c in "123"}


def test_steps_of_a_run_with_images_made_side_by_side_count_the_stages_waits_not_the_bases():
    import copy

    result = copy.deepcopy(RESULT)
    result["stages"][0]["timings"] = {
        "fetch": 2.0,
        "images": 320.0,
        "toolchain": 1.0,
        "accelerated": 0.5,
        "build": 60.0,
        "verify": 1.0,
        "smoke": 20.0,
    }
    result["stages"][1]["timings"] = {
        "fetch": 8.0,
        "images": 10.0,
        "toolchain": 1.0,
        "build": 200.0,
        "verify": 1.0,
    }
    got = bench.steps(result, verify_wall=5.0, total=1000.0)
    assert got["riscv64 base debian-trixie"] == 300.0 and got[bench.WAITED] == 330.0  # shown, not summed
    assert got["other (plan, contexts, export, start-up)"] == pytest.approx(
        1000.0 - 330.0 - 2.0 - 0.5 - 10.0 - 260.0 - 2.0 - 20.0 - 5.0
    )


def test_the_wait_for_a_smoke_image_made_beside_the_build_counts_with_the_smoke_test():
    import copy

    result = copy.deepcopy(RESULT)
    result["stages"][0]["timings"] = dict(result["stages"][0]["timings"], smoke_image=7.0)
    got = bench.steps(result, verify_wall=5.0, total=1000.0)
    assert got["smoke tests (image and test)"] == 27.0
    assert sum(got.values()) == pytest.approx(1000.0)
    older = bench.steps(RESULT, verify_wall=5.0, total=1000.0, other_rev=True)  # no smoke_image: smoke
    assert older["smoke tests (image and test)"] == 20.0


def test_the_report_gives_ratio_and_share_saved_per_step_and_says_when_loads_differ():
    old = {
        "steps": {"riscv64 base debian-trixie": 700.0, "other": 100.0},
        "total": 800.0,
        "load": {"mean": 3.0, "min": 2.0, "max": 4.0, "cpus": 2},
    }
    new = {
        "steps": {"riscv64 base debian-trixie": 200.0, "other": 100.0},
        "total": 300.0,
        "load": {"mean": 6.0, "min": 5.0, "max": 7.0, "cpus": 2},
    }
    lines = bench.report(old, new)
    base = next(ln for ln in lines if ln.startswith("riscv64 base"))
    assert "700s" in base and "200s" in base and "3.50x" in base and "71.4%" in base
    total = next(ln for ln in lines if ln.startswith("total"))
    assert "2.67x" in total and "62.5%" in total
    assert any("different loads" in ln for ln in lines)


def test_held_equal_counts_only_the_riscv64_base_against_either_runs_other_steps():
    old = {"steps": {"riscv64 base debian-trixie": 1127.0}, "total": 2719.0}
    new = {"steps": {"riscv64 base debian-trixie": 371.0}, "total": 1561.0}
    a, b = bench.held_equal(old, new)
    assert a == pytest.approx((1 - (1592 + 371) / 2719) * 100) and b == pytest.approx(
        (1 - 1561 / (1190 + 1127)) * 100
    )
    assert bench.held_equal({"steps": {}, "total": 1.0}, new) is None


# ------------------------------------------------------------------------------------------ --old-rev
OLD_README = """# rvport

    rvport plan    -> plan.json     every pin, flag and command, before anything runs
    rvport build   -> result.json   buildx stages; artifacts, logs, verdicts, smoke tests
    rvport verify  -> verdicts      ELF/ISA/ABI proof for wheels, .so, .a members and binaries

```sh
scripts/setup-host && python3 -m pip install -e . && rvport build msgspec sentencepiece tiktoken \
--profile rvv256 \
--tag local --output out && rvport verify artifacts out/artifacts/msgspec \
out/artifacts/sentencepiece --profile rvv256
```
"""


def test_the_old_readmes_main_command_is_its_line_with_both_build_and_verify_not_the_overview():
    build, verify = bench.readme_commands(OLD_README)
    assert build == [
        "build",
        "msgspec",
        "sentencepiece",
        "tiktoken",
        "--profile",
        "rvv256",
        "--tag",
        "local",
        "--output",
        "out",
    ]
    assert verify == [
        "verify",
        "artifacts",
        "out/artifacts/msgspec",
        "out/artifacts/sentencepiece",
        "--profile",
        "rvv256",
    ]
    with pytest.raises(SystemExit, match="no line with both"):
        bench.readme_commands("    rvport build   -> result.json\n    rvport verify  -> verdicts\n")


def test_the_bench_runs_this_readmes_main_command():
    build, verify = bench.readme_commands((ROOT / "README.md").read_text())
    assert (tuple(build), tuple(verify)) == (bench.BUILD, bench.VERIFY)


def test_each_run_gets_its_own_output_directory_in_both_commands_and_verify_writes_json(tmp_path):
    out, vj = tmp_path / "run" / "out", tmp_path / "run" / "verify.json"
    build, verify = bench.run_args(bench.BUILD, bench.VERIFY, out, vj)
    assert build == [
        "build",
        "msgspec",
        "sentencepiece",
        "tiktoken",
        "--profile",
        "rvv256",
        "--tag",
        "local",
        "--output",
        str(out),
    ]
    assert verify == ["verify", "artifacts", str(out / "artifacts"), "--profile", "rvv256", "--json", str(vj)]
    _, verify = bench.run_args(*bench.readme_commands(OLD_README), out, vj)
    assert verify == [
        "verify",
        "artifacts",
        str(out / "artifacts" / "msgspec"),
        str(out / "artifacts" / "sentencepiece"),
        "--profile",
        "rvv256",
        "--json",
        str(vj),
    ]
    assert bench.run_args(
        ["build", "x", "-o", "dist/"], ["verify", "artifacts", "dist", "distant/a"], out, vj
    ) == (["build", "x", "-o", str(out)], ["verify", "artifacts", str(out), "distant/a", "--json", str(vj)])
    assert bench.run_args(
        ["build", "x", "--output=dist"], ["verify", "artifacts", "dist/artifacts"], out, vj
    )[0] == ["build", "x", f"--output={out}"]
    assert bench.run_args(["build", "x"], ["verify", "artifacts", "out/artifacts"], out, vj) == (
        ["build", "x", "--output", str(out)],
        ["verify", "artifacts", str(out / "artifacts"), "--json", str(vj)],
    )


def test_the_old_revision_is_its_git_archive_installed_not_editable_into_a_fresh_venv(tmp_path):
    cmds = bench.old_rev_setup(Path("/repo"), "c" * 40, tmp_path, "/usr/bin/python3")
    assert cmds[0] == [
        "git",
        "-C",
        "/repo",
        "archive",
        "--format=tar",
        "--prefix=src/",
        "-o",
        str(tmp_path / "src.tar"),
        "c" * 40,
    ]
    assert cmds[1] == ["tar", "-xf", str(tmp_path / "src.tar"), "-C", str(tmp_path)]
    assert cmds[2] == ["/usr/bin/python3", "-m", "venv", str(tmp_path / "venv")]
    assert cmds[3] == [
        str(tmp_path / "venv" / "bin" / "python"),
        "-m",
        "pip",
        "install",
        str(tmp_path / "src"),
    ]
    rev = bench.OldRev("c" * 40, tmp_path / "src", tmp_path / "venv", bench.BUILD, bench.VERIFY)
    assert rev.short == "ccccccc" and rev.command == [str(tmp_path / "venv" / "bin" / "rvport")]


def test_another_rvport_runs_as_given_in_its_directory_without_this_checkout_on_pythonpath(tmp_path):
    import common  # bench/, first on sys.path above

    probe = "import os, sys; print(os.getcwd()); print(os.environ.get('PYTHONPATH')); print(sys.argv[1:])"
    rc, wall = common.rvport(
        ["build", "x"],
        log=tmp_path / "log",
        env={"PATH": "/usr/bin:/bin"},
        command=[sys.executable, "-c", probe],
        cwd=tmp_path,
    )
    assert rc == 0 and wall >= 0
    assert (tmp_path / "log").read_text().splitlines() == [str(tmp_path), "None", "['build', 'x']"]


# result.json as cedd32c writes it: no duration_s on the base images, no "accelerated" timing
OLD_RESULT = {
    "base_images": {
        "debian-trixie@linux/riscv64": {
            "spec": "debian-trixie",
            "platform": "linux/riscv64",
            "image_id": "sha256:" + "1" * 64,
        },
        "debian-trixie-xtc@linux/amd64": {
            "spec": "debian-trixie-xtc",
            "platform": "linux/amd64",
            "image_id": "sha256:" + "2" * 64,
        },
    },
    "stages": [
        {
            "recipe": "msgspec",
            "timings": {
                "fetch": 2.0,
                "base": 700.0,
                "toolchain": 40.0,
                "build": 60.0,
                "verify": 1.0,
                "smoke": 20.0,
            },
        },
        {
            "recipe": "tiktoken",
            "timings": {"fetch": 8.0, "base": 100.0, "toolchain": 50.0},
        },  # failed in build
    ],
}


def test_steps_of_an_older_result_are_na_where_it_times_nothing_and_its_bases_one_row():
    got = bench.steps(OLD_RESULT, verify_wall=5.0, total=1500.0, other_rev=True)
    assert got["riscv64 base debian-trixie"] is None and got["build-platform base debian-trixie-xtc"] is None
    assert got[bench.BASES_TOGETHER] == 800.0
    assert got["accelerated prefix images"] is None and got["toolchain images (apt, emulated)"] == 90.0
    assert got["msgspec wheel build"] == 60.0 and got["tiktoken wheel build"] is None
    assert got["other (plan, contexts, export, start-up)"] == pytest.approx(
        1500.0 - 800 - 90 - 10 - 60 - 1 - 20 - 5
    )
    # this revision's result.json has no such gaps: the same figures as without the option
    assert bench.steps(RESULT, 5.0, 1000.0, other_rev=True) == bench.steps(RESULT, 5.0, 1000.0)
    assert bench.steps({}, 5.0, 10.0, other_rev=True)["other (plan, contexts, export, start-up)"] == 5.0


def _run(way, steps, total, **extra):
    return dict(
        {
            "way": way,
            "steps": steps,
            "total": total,
            "wheels": {},
            "load": {"mean": 2.0, "min": 1.0, "max": 3.0, "cpus": 2},
        },
        **extra,
    )


def test_the_report_against_an_old_revision_labels_it_says_na_and_still_compares_totals_and_bases():
    old = _run(
        "old",
        bench.steps(OLD_RESULT, 5.0, 1500.0, other_rev=True),
        1500.0,
        label="old (rev cedd32c)",
        rev="cedd32c" + "0" * 33,
    )
    new = _run("new", bench.steps(RESULT, 5.0, 1000.0), 1000.0)
    lines = bench.report(old, new)
    assert lines[0].split() == ["old", "(rev", "cedd32c)", "new", "old/new", "saved"]
    base = next(ln for ln in lines if ln.startswith("riscv64 base"))
    assert base.split()[-4:] == ["n/a", "300s", "-", "-"]
    together = next(ln for ln in lines if ln.startswith(bench.BASES_TOGETHER))
    assert "800s" in together and "390s" in together and "2.05x" in together  # the new run's bases summed
    assert next(ln for ln in lines if ln.startswith("accelerated")).split()[-4:] == ["n/a", "30s", "-", "-"]
    total = next(ln for ln in lines if ln.startswith("total"))
    assert "1500s" in total and "1000s" in total and "1.50x" in total and "33.3%" in total
    assert "old (rev cedd32c) 1.0-3.0, new 1.0-3.0" in next(ln for ln in lines if ln.startswith("load"))
    assert not any(ln.startswith("with the steps the way does not change") for ln in lines)
    assert any("no share with the other steps held equal" in ln for ln in lines)
    widths = {len(ln) for ln in lines if ln.endswith(("%", "-"))}
    assert len(widths) == 1  # the columns line up


def test_the_report_never_fails_on_a_run_that_recorded_nothing():
    old = _run(
        "old", bench.steps({}, 0.0, 12.0, other_rev=True), 12.0, label="old (rev cedd32c)", rev="c" * 40
    )
    new = _run("new", bench.steps(RESULT, 5.0, 1000.0), 1000.0)
    lines = bench.report(old, new)
    assert any(ln.startswith("total") and "12s" in ln for ln in lines)
    assert next(ln for ln in lines if ln.startswith("msgspec wheel build")).split()[-4:] == [
        "n/a",
        "60s",
        "-",
        "-",
    ]


def test_two_revisions_wheels_that_differ_are_reported_not_a_failure():
    old = _run(
        "old",
        {},
        1.0,
        label="old (rev cedd32c)",
        rev="c" * 40,
        wheels={"a.whl": "1" * 64, "s-0.2.2.whl": "2" * 64},
    )
    new = _run("new", {}, 1.0, wheels={"a.whl": "1" * 64, "s-0.2.3.whl": "3" * 64})
    lines = bench.wheel_lines(old, new)
    assert lines[0] == "the wheels' sha256 agree between the two runs: False" and "not a failure" in lines[1]
    assert (
        f"   a.whl: {'1' * 64}" in lines and f"   s-0.2.2.whl: old (rev cedd32c) {'2' * 64}, new -" in lines
    )
    same = bench.wheel_lines(
        _run("old", {}, 1.0, wheels={"a.whl": "1"}), _run("new", {}, 1.0, wheels={"a.whl": "1"})
    )
    assert same == ["the wheels' sha256 agree between the two runs: True", "   a.whl: 1"]


class _FakeEngine:
    host = "unix:///fake/docker.sock"

    def __init__(self, root, **kw):
        self.root = root

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def env(self, base):
        return dict(base, DOCKER_HOST=self.host)

    def facts(self):
        return {"server_version": "0", "storage_driver": "vfs", "buildkit": "0"}

    def image_ids(self):
        return {"sha256:" + c * 64 for c in "12"}


def test_the_old_revision_runs_through_the_same_measurement_with_its_own_command_and_environment(
    tmp_path, monkeypatch
):
    calls = []

    def fake_rvport(args, *, log, env, command=None, cwd=None):
        calls.append((list(args), env, command, cwd))
        if args[0] == "build":
            out = Path(args[args.index("--output") + 1])
            (out / "artifacts" / "msgspec").mkdir(parents=True)
            (out / "artifacts" / "msgspec" / "m.whl").write_bytes(b"m")
            (out / "result.json").write_text(json.dumps(dict(OLD_RESULT, status="ok")))
        else:
            Path(args[args.index("--json") + 1]).write_text(json.dumps({"ok": True, "summary": {}}))
        return 0, 1.0

    monkeypatch.setattr(bench, "PrivateEngine", _FakeEngine)
    monkeypatch.setattr(bench.common, "rvport", fake_rvport)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("RVPORT_BOOTSTRAP", "split")
    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "no-cargo"))
    old_rev = bench.OldRev("c" * 40, tmp_path / "src", tmp_path / "venv", *bench.readme_commands(OLD_README))
    args = type("Args", (), {"keep": False, "storage_driver": None})()
    res = bench.one_run("old", None, tmp_path / "old", args, None, old_rev)

    (build, env, command, cwd), (verify, _, command2, _) = calls
    out = tmp_path / "old" / "out"
    assert command == command2 == [str(tmp_path / "venv" / "bin" / "rvport")] and cwd == tmp_path / "src"
    assert "PYTHONPATH" not in env and "RVPORT_BOOTSTRAP" not in env
    assert env["RVPORT_CACHE_DIR"] == str(tmp_path / "old" / "cache")
    assert build[-2:] == ["--output", str(out)] and verify[2:4] == [
        str(out / "artifacts" / "msgspec"),
        str(out / "artifacts" / "sentencepiece"),
    ]
    assert res["label"] == "old (rev ccccccc)" and res["rev"] == "c" * 40 and res["RVPORT_BOOTSTRAP"] is None
    assert res["steps"]["accelerated prefix images"] is None and res["steps"][bench.BASES_TOGETHER] == 800.0
    assert res["verify_ok"] and res["in_private_engine"] and list(res["wheels"]) == ["m.whl"]

    calls.clear()  # without the option: this checkout's rvport, the way's RVPORT_BOOTSTRAP
    res = bench.one_run("old", "debootstrap", tmp_path / "again", args, None)
    (build, env, command, cwd), (verify, _, _, _) = calls
    assert command is None and cwd is None and env["RVPORT_BOOTSTRAP"] == "debootstrap"
    assert verify[2] == str(tmp_path / "again" / "out" / "artifacts") and "label" not in res
