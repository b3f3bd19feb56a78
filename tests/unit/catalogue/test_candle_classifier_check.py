"""candle-binding's classifier check: our tiny ModernBERT (the same bytes from its seed everywhere) and our
driver, which classifies through the library's C entry points and compares with another build's results
(issue 38, item 3). The driver is compiled here with the host's C compiler against a fake of the three
entry points it calls, so its comparison and its report are checked without the 128 MB library."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rvport import proc
from rvport.catalogue.recipes import load_catalogue
from rvport.engine import smokereport
from rvport.resources import builtin
from tests.fixtures.hosttools import needs

RECIPE_DIR = builtin("recipes", "candle-binding")
SCRIPT = RECIPE_DIR / "tiny-modernbert.py"
DRIVER = RECIPE_DIR / "classify.c"


def make_model(out: Path) -> Path:
    subprocess.run([sys.executable, str(SCRIPT), str(out)], check=True, capture_output=True, timeout=120)
    return out


def safetensors(path: Path) -> dict:
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    body = len(data) - 8 - size
    assert size % 8 == 0
    spans = sorted(v["data_offsets"] for k, v in header.items() if k != "__metadata__")
    assert spans[0][0] == 0 and spans[-1][1] == body  # the tensors cover the data, none overlaps
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    for k, v in header.items():
        if k != "__metadata__":
            n = 1
            for d in v["shape"]:
                n *= d
            assert v["dtype"] == "F32" and v["data_offsets"][1] - v["data_offsets"][0] == 4 * n, k
    return header


def test_the_tiny_model_is_the_same_bytes_from_its_seed_and_has_what_candle_loads(tmp_path):
    a, b = make_model(tmp_path / "a"), make_model(tmp_path / "b")
    names = ["config.json", "model.safetensors", "texts.txt", "tokenizer.json"]
    assert sorted(p.name for p in a.iterdir()) == names
    assert all((a / n).read_bytes() == (b / n).read_bytes() for n in names)
    config = json.loads((a / "config.json").read_text())
    tokenizer = json.loads((a / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    assert tokenizer["model"]["type"] == "WordLevel" and config["vocab_size"] == len(vocab)
    assert sorted(vocab.values()) == list(range(len(vocab)))
    assert config["id2label"] == {"0": "math", "1": "code", "2": "poetry"}
    header = safetensors(a / "model.safetensors")
    h, i, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    shapes = {k: v["shape"] for k, v in header.items() if k != "__metadata__"}
    assert shapes["model.embeddings.tok_embeddings.weight"] == [len(vocab), h]
    assert shapes["classifier.weight"] == [3, h] and shapes["classifier.bias"] == [3]
    assert shapes["head.dense.weight"] == [h, h] and shapes["head.norm.weight"] == [h]
    for n in range(layers):
        assert shapes[f"model.layers.{n}.attn.Wqkv.weight"] == [3 * h, h]
        assert shapes[f"model.layers.{n}.mlp.Wi.weight"] == [2 * i, h]
        assert shapes[f"model.layers.{n}.mlp.Wo.weight"] == [h, i]
        assert (f"model.layers.{n}.attn_norm.weight" in shapes) == (n > 0)
    texts = (a / "texts.txt").read_text().splitlines()
    assert len(texts) == 10 and all(t and t.isprintable() for t in texts)


FAKE = textwrap.dedent("""\
    /* the three entry points the driver calls: probabilities from the text's length, moved by FAKE_SHIFT */
    #include <stdbool.h>
    #include <stdlib.h>
    #include <string.h>
    typedef struct { int predicted_class; float confidence; float *probabilities; int num_classes; } R;
    bool init_modernbert_classifier(const char *model, bool use_cpu) { return !getenv("FAKE_NO_MODEL"); }
    R classify_modernbert_text_with_probabilities(const char *text) {
        float *p = malloc(3 * sizeof *p), shift = getenv("FAKE_SHIFT") ? atof(getenv("FAKE_SHIFT")) : 0;
        float a = (strlen(text) % 7) / 10.0f;
        p[0] = 0.2f + a + shift; p[1] = 0.5f - a; p[2] = 0.3f - shift;
        int best = p[0] > p[1] ? (p[0] > p[2] ? 0 : 2) : (p[1] > p[2] ? 1 : 2);
        R r = {best, p[best], p, 3};
        return r;
    }
    void free_modernbert_probabilities(float *p, int n) { free(p); }
    """)


@pytest.fixture
def driver(tmp_path) -> Path:
    (tmp_path / "fake.c").write_text(FAKE)
    exe = tmp_path / "candle-classify"
    proc.run(
        [
            "cc",
            "-O2",
            "-Wall",
            "-Werror",
            "-Wno-unused-parameter",
            str(DRIVER),
            str(tmp_path / "fake.c"),
            "-lm",
            "-o",
            str(exe),
        ],
        capture=True,
        timeout=120,
    )
    return exe


def run(exe: Path, *args: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(exe), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"QEMU_CPU": "rv64,v=true", **env},
    )


@needs("cc")
def test_the_driver_passes_a_reference_within_the_tolerance_and_reports_one_check(tmp_path, driver):
    model = make_model(tmp_path / "model")
    first = run(driver, model)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert len(lines) == 10 and all(len(ln.split()) == 3 + 3 for ln in lines)
    ref = tmp_path / "reference.txt"
    ref.write_text(first.stdout)
    report = tmp_path / "report.json"
    near = run(driver, model, ref, report, FAKE_SHIFT="0.0004")
    assert near.returncode == 0, near.stderr
    assert "parity passed: 10 texts, 0 labels differ" in near.stdout
    (check,) = smokereport.parse(report.read_bytes())
    assert check["name"] == "classifier parity with x86-64" and check["passed"] is True
    figures = check["figures"]
    assert figures["texts"] == 10 and figures["labels_differ"] == 0 and figures["tolerance"] == 0.001
    assert 0.0003 < figures["max_probability_difference"] < 0.0005 and figures["qemu_cpu"] == "rv64,v=true"


@needs("cc")
def test_the_driver_fails_a_result_off_the_reference_and_names_the_text(tmp_path, driver):
    model = make_model(tmp_path / "model")
    ref = tmp_path / "reference.txt"
    ref.write_text(run(driver, model).stdout)
    report = tmp_path / "report.json"
    off = run(driver, model, ref, report, FAKE_SHIFT="0.002")
    assert off.returncode == 1
    assert 'text 1 ("solve the integral")' in off.stderr and "parity failed" in off.stdout
    (check,) = smokereport.parse(report.read_bytes())
    assert check["passed"] is False and check["figures"]["max_probability_difference"] > 0.001
    # a label that differs fails even where the probabilities are close: a shift that flips a near tie
    flips = run(driver, model, ref, report, FAKE_SHIFT="0.25")
    assert flips.returncode == 1 and smokereport.parse(report.read_bytes())[0]["figures"]["labels_differ"] > 0


@needs("cc")
def test_the_driver_refuses_a_reference_of_another_length_and_a_model_that_does_not_load(tmp_path, driver):
    model = make_model(tmp_path / "model")
    lines = run(driver, model).stdout.splitlines()
    ref = tmp_path / "reference.txt"
    for text in ("\n".join(lines[:-1]) + "\n", "\n".join(lines + lines[:1]) + "\n", "garbage\n"):
        ref.write_text(text)
        cp = run(driver, model, ref)
        assert cp.returncode == 2 and "does not hold exactly 10 results" in cp.stderr
    assert run(driver, model, FAKE_NO_MODEL="1").returncode == 3
    (model / "texts.txt").write_text("x" * 5000 + "\n")
    cp = run(driver, model)
    assert cp.returncode == 2 and "a line over" in cp.stderr
    (model / "texts.txt").unlink()
    assert run(driver, model).returncode == 2


def test_the_recipe_builds_the_check_and_compares_in_its_smoke_test():
    r = load_catalogue().resolve("candle-binding")
    build = "\n".join(r.build)
    assert "python3 /src/_rvport/tiny-modernbert.py" in build and "riscv64-linux-gnu-gcc" in build
    # the x86-64 reference: the same crate, tree and compiler, in cross mode (the stage runs on x86-64)
    assert 'if [ "$RVPORT_MODE" = cross ]' in build and '--target "$host"' in build
    driver = next(o for o in r.outputs if o.glob == "candle-classify")
    assert driver.type.value == "executable" and driver.isa.value == "baseline"
    assert './candle-classify model "$1" "$RVPORT_SMOKE_REPORT"' in (r.smoke or "")
    pinned = {f.dest: f for f in r.files}
    assert set(pinned) >= {"_rvport/tiny-modernbert.py", "_rvport/classify.c"}
