#!/usr/bin/env python3
"""torch.compile's C++ backend (inductor) on riscv64 under QEMU, with Debian's torch: compiled against eager.

    .venv/bin/python bench/inductor_probe.py --image IMAGE --profile rv64gc [--cpu rvv256] [--name NAME] \
        [--torch-headers DIR]

IMAGE is a riscv64 image with what the vllm lock's system packages give (g++, libtorch-dev, the Python
headers, libgcc's OpenMP) and python3-torch: vllm's build image (`rvport prepare vllm`) or the serving
check's; or an image with python3-torch and g++ but no libtorch-dev (vllm's smoke image), given
--torch-headers DIR: libtorch-dev's usr/include unpacked (`dpkg -x` of the lock's .deb, checked by its
sha256), whose ATen, c10, caffe2 and torch are bind-mounted read-only where the package puts them.
In one container (no network, QEMU_CPU of --cpu, default --profile's) it sets the settings the wheelhouse's
inductor-env.sh sets for --profile (rvport/closure/inductor.py: TORCHINDUCTOR_CPP_MARCH with the profile's
-march and -mabi, the cache in the output directory), then times `import torch`, the first call of
torch.compile(dynamic=True) of vLLM's SiluAndMul.forward_native (silu of the first half times the second: what
inductor compiles for every SiluAndMul of vLLM on the CPU), a second call at another shape, and the mean of 50
calls compiled and eager, and compares the results. On the host, every shared object inductor left is
verified for --profile (`rvport verify`, runs-on). The record: records/closure/inductor-probe-NAME.json (NAME
defaults to PROFILE-on-CPU). Figures under QEMU on a shared host, not a board's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import stop_on_signals, write_record  # noqa: E402

PROBE = r"""
import glob, json, os, time
t0 = time.monotonic()
import torch
import torch.nn.functional as F
imported = time.monotonic() - t0

def silu_and_mul(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]

torch.manual_seed(0)
x, x2 = torch.randn(7, 1024), torch.randn(83, 1024)
compiled = torch.compile(silu_and_mul, dynamic=True)
t = time.monotonic(); y = compiled(x); first = time.monotonic() - t
t = time.monotonic(); y2 = compiled(x2); second = time.monotonic() - t
same = bool(torch.allclose(y, silu_and_mul(x), atol=1e-5) and torch.allclose(y2, silu_and_mul(x2), atol=1e-5))
def each(fn, n=50):
    t = time.monotonic()
    for _ in range(n):
        fn(x2)
    return (time.monotonic() - t) / n
print(json.dumps({"torch": torch.__version__, "import_seconds": round(imported, 2),
    "first_call_seconds": round(first, 2), "second_call_seconds": round(second, 3), "same_result": same,
    "compiled_call_ms": round(each(compiled) * 1e3, 3), "eager_call_ms": round(each(silu_and_mul) * 1e3, 3),
    "march_env": os.environ.get("TORCHINDUCTOR_CPP_MARCH")}))
"""


def main(argv: list[str] | None = None) -> int:
    from rvport import host
    from rvport.catalogue.closure_lock import load_lock, locks_dir
    from rvport.catalogue.profiles import get_profile
    from rvport.closure import inductor

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--cpu", help="the profile whose QEMU CPU runs it (default: --profile)")
    ap.add_argument("--name")
    ap.add_argument("--torch-headers", type=Path, help="libtorch-dev's usr/include, for an image without it")
    a = ap.parse_args(argv)
    stop_on_signals()
    profile, cpu = get_profile(a.profile), get_profile(a.cpu or a.profile)
    settings = inductor.settings(load_lock(locks_dir() / "vllm-0.33.0-cp314.yaml"), profile, 16)
    assert settings is not None
    with tempfile.TemporaryDirectory(prefix="inductor-probe-") as tmp:
        out = Path(tmp)
        (out / "probe.py").write_text(PROBE)
        os.chmod(out, 0o777)
        cmd = ["docker", "run", "--rm", "--network", "none", "--platform", "linux/riscv64",
               "--user", f"{os.getuid()}:{os.getgid()}", "-e", f"QEMU_CPU={cpu.qemu_cpu}", "-e", "HOME=/out",
               "-e", f"TORCHINDUCTOR_CPP_MARCH={settings.march_value}",
               "-e", "TORCHINDUCTOR_CACHE_DIR=/out/cache",
               "-v", f"{out}:/out"]  # fmt: skip
        if a.torch_headers:
            for d in ("ATen", "c10", "caffe2", "torch"):
                cmd += ["-v", f"{(a.torch_headers / d).resolve()}:/usr/include/{d}:ro"]
        cmd += [a.image, "python3", "/out/probe.py"]
        t0 = time.monotonic()
        with host.LoadAverage() as load:  # the host's load beside the run, sampled
            p = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.monotonic() - t0
        result = next((json.loads(x) for x in reversed(p.stdout.splitlines()) if x.startswith("{")), {})
        verified = inductor.verify_cache(out / "cache", profile)
    figures = {
        "image": a.image,
        "torch_headers": str(a.torch_headers) if a.torch_headers else "the image's libtorch-dev",
        "profile": profile.name,
        "cpu": cpu.name,
        "qemu_cpu": cpu.qemu_cpu,
        "exit_status": p.returncode,
        "container_seconds": round(wall, 1),
        **result,
        "compiled_over_eager_call": round(result["compiled_call_ms"] / result["eager_call_ms"], 3)
        if result.get("eager_call_ms")
        else None,
        "verify": {k: verified[k] for k in ("objects", "arch", "passed", "failed")},
        "stderr_tail": p.stderr.splitlines()[-5:],
    }
    path = write_record(
        "closure",
        f"inductor-probe-{a.name or f'{profile.name}-on-{cpu.name}'}",
        command=["python", "bench/inductor_probe.py", *(argv if argv is not None else sys.argv[1:])],
        figures=figures,
        load=load.summary(),
    )
    print(json.dumps(figures, indent=2))
    print(f"wrote {path}")
    return 0 if p.returncode == 0 and verified["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
