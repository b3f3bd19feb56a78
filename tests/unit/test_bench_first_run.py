"""bench/first_run.py: the private engine's command line and settings, its network rules, and the step table
read from a result.json (no engine, no root)."""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
spec = importlib.util.spec_from_file_location("bench_first_run", ROOT / "bench" / "first_run.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_the_private_daemon_has_its_own_places_and_config_and_leaves_the_hosts_chains_alone(tmp_path):
    argv = bench.dockerd_argv(tmp_path, "rvb1")
    opt = dict(zip(argv[1::2], argv[2::2]))
    assert opt["--config-file"] == str(tmp_path / "daemon.json")       # /etc/docker/daemon.json is not read
    assert opt["--data-root"] == str(tmp_path / "data") and opt["--exec-root"] == str(tmp_path / "exec")
    assert opt["--pidfile"] == str(tmp_path / "dockerd.pid") and opt["-H"] == f"unix://{tmp_path}/docker.sock"
    assert opt["--bridge"] == "rvb1" and "--iptables=false" in argv and "--ip6tables=false" in argv


def test_the_private_daemon_takes_how_the_host_stores_and_networks_never_where(tmp_path):
    host = tmp_path / "daemon.json"
    host.write_text(json.dumps({"data-root": "/var/lib/docker", "storage-driver": "fuse-overlayfs", "mtu": 1400,
                                "hosts": ["unix:///var/run/docker.sock"], "log-driver": "json-file"}))
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
    assert bench.free_subnet("10.199.0.0/24", ["172.17.0.0/16", "192.0.2.0/24"]) == \
        ipaddress.ip_network("10.199.0.0/24")
    with pytest.raises(SystemExit, match="overlaps the host's route 10.199.0.128/25"):
        bench.free_subnet("10.199.0.0/24", ["10.199.0.128/25"])


def test_the_engine_environment_points_every_docker_client_at_the_private_daemon(tmp_path):
    eng = bench.PrivateEngine(tmp_path, bridge="rvb1", subnet=ipaddress.ip_network("10.199.0.0/24"), settings={},
                              keep=False)
    env = eng.env({"DOCKER_HOST": "unix:///var/run/docker.sock", "DOCKER_CONTEXT": "remote", "PATH": "/bin",
                   "BUILDX_BUILDER": "mine"})
    assert env == {"DOCKER_HOST": f"unix://{tmp_path}/docker.sock", "BUILDX_BUILDER": "default", "PATH": "/bin"}


RESULT = {
    "base_images": {
        "debian-trixie-xtc@linux/amd64": {"spec": "debian-trixie-xtc", "platform": "linux/amd64", "duration_s": 90.0,
                                          "image_id": "sha256:" + "2" * 64},
        "debian-trixie@linux/riscv64": {"spec": "debian-trixie", "platform": "linux/riscv64", "duration_s": 300.0,
                                        "image_id": "sha256:" + "1" * 64},
    },
    "stages": [
        {"recipe": "msgspec", "timings": {"fetch": 2.0, "base": 390.0, "toolchain": 40.0, "accelerated": 30.0,
                                          "build": 60.0, "verify": 1.0, "smoke": 20.0},
         "images": {"base": "sha256:" + "1" * 64, "toolchain": "sha256:" + "3" * 64, "xtc_tag": "rvport/xtc:x"}},
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
    assert sum(got.values()) == pytest.approx(1000.0)    # the stage's "base" timing is the bases' own, not added
    assert bench.image_ids(RESULT) == {"sha256:" + c * 64 for c in "123"}


def test_the_report_gives_ratio_and_share_saved_per_step_and_says_when_loads_differ():
    old = {"steps": {"riscv64 base debian-trixie": 700.0, "other": 100.0}, "total": 800.0,
           "load": {"mean": 3.0, "min": 2.0, "max": 4.0, "cpus": 2}}
    new = {"steps": {"riscv64 base debian-trixie": 200.0, "other": 100.0}, "total": 300.0,
           "load": {"mean": 6.0, "min": 5.0, "max": 7.0, "cpus": 2}}
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
    assert a == pytest.approx((1 - (1592 + 371) / 2719) * 100) and b == pytest.approx((1 - 1561 / (1190 + 1127)) * 100)
    assert bench.held_equal({"steps": {}, "total": 1.0}, new) is None
