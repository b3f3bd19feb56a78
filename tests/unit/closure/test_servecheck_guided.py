"""The serving check's guided step (docs/closure.md, "The serving check"): in the container, the request
bodies, vLLM's server arguments, the tokenizer's vocabulary and the judge of each answer (serve-check.py's
pure functions, run here as the container runs them), one backend's program against a stand-in server; on
the host, result.json's guided results read back with bounds, the figures and the failure message. vLLM
itself runs only in the riscv64 container."""

from __future__ import annotations

import importlib.util
import json
import re
import socket
import sys
from pathlib import Path

import jsonschema
import pytest

from rvport import manifest, resources
from rvport.closure import servecheck
from tests.fixtures.schemas import validate
from tests.unit.closure.test_servecheck import ALL_PASS, PET, answer, guided_inside, make_record

SCRIPT = resources.builtin("scripts", "serve-check.py")
_spec = importlib.util.spec_from_file_location("serve_check_inside_guided", SCRIPT)
inside = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(inside)

# what vLLM 0.33.0 answers (HTTP 400) for a schema its xgrammar backend cannot compile: pattern and maxLength
# on one string (vllm/v1/structured_output/backend_xgrammar.py, has_xgrammar_unsupported_json_features)
XGRAMMAR_400 = json.dumps(
    {
        "error": {
            "message": "The provided JSON schema contains features not supported by xgrammar.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }
)


# ------------------------------------------------------------------------------------- the container's
def test_the_host_and_the_container_name_the_same_step_backends_and_requests():
    assert servecheck.STEPS == inside.STEPS and servecheck.STEPS[-2:] == ("guided", "tests")
    assert servecheck.GUIDED_BACKENDS == inside.BACKENDS == ("xgrammar", "guidance", "outlines")
    assert servecheck.GUIDED_KINDS == inside.KINDS and servecheck.SERVES == frozenset(inside.SERVES)
    # each backend's program within a step's timeout of its own: the container is given them all
    assert servecheck.step_timeouts() == len(servecheck.STEPS) - 1 + 3


def test_each_request_puts_its_constraint_in_structured_outputs_greedy_and_stopped_by_the_grammar():
    for kind in inside.KINDS:
        body = inside.guided_body(kind)
        assert set(body["structured_outputs"]) == {kind}  # StructuredOutputsParams' json, regex, choice
        assert body["temperature"] == 0 and "ignore_eos" not in body and body["model"] == "tiny"
        # one token a byte: the prompt and the longest answer fit the guided model's context
        assert len(body["prompt"].encode()) + body["max_tokens"] <= inside.GUIDED_CONTEXT
    assert inside.guided_body("json")["structured_outputs"]["json"] == inside.SCHEMA
    assert inside.guided_body("regex")["structured_outputs"]["regex"] == inside.REGEX
    assert inside.guided_body("choice")["structured_outputs"]["choice"] == inside.CHOICES
    json.dumps(inside.guided_body("json"))  # sent as JSON


def walk(schema: dict):
    yield schema
    for sub in (schema.get("properties") or {}).values():
        yield from walk(sub)
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"])


def test_the_schema_nests_closes_every_object_and_bounds_every_string_and_array():
    jsonschema.Draft202012Validator.check_schema(inside.SCHEMA)
    kinds = set()
    for node in walk(inside.SCHEMA):
        kinds.add(node.get("type", "enum" if "enum" in node else None))
        if node.get("type") == "object":  # closed, every property required: no key the model may invent
            assert node["additionalProperties"] is False and set(node["required"]) == set(node["properties"])
        if node.get("type") == "string":  # a bounded pattern of ASCII letters, anchored
            assert re.fullmatch(r"\^\[[A-Za-z-]+\]\{1,\d\}\$", node["pattern"]) and "maxLength" not in node
        if node.get("type") == "array":
            assert 1 <= node["minItems"] <= node["maxItems"] <= 3 and "enum" in node["items"]
    assert {"object", "string", "enum", "array", "boolean"} <= kinds
    # the longest answer any backend allows (each separator given a space, as outlines may) fits max_tokens
    longest = {
        "name": "A" * 8,
        "kind": "fish",
        "home": {"city": "a" * 6, "indoor": False},
        "tags": ["small"] * 3,
    }
    jsonschema.validate(longest, inside.SCHEMA)
    assert len(json.dumps(longest, indent=0)) * 2 < inside.GUIDED_MAX_TOKENS


def test_each_backend_is_chosen_server_wide_eager_with_our_tokenizer():
    for backend in inside.BACKENDS:
        argv = inside.guided_server("py", Path("/m"), Path("/t"), backend, 8000)
        assert argv[:5] == ["py", "-m", "vllm.entrypoints.cli.main", "serve", "/m"]
        config = json.loads(argv[argv.index("--structured-outputs-config") + 1])
        assert config["backend"] == backend
        # disable_any_whitespace: only xgrammar and guidance take it (vLLM refuses it for outlines)
        assert config.get("disable_any_whitespace", False) is (backend != "outlines")
        assert "--enforce-eager" in argv and argv[argv.index("--tokenizer") + 1] == "/t"
        assert argv[argv.index("--tokenizer-mode") + 1] == "hf"
        assert argv[argv.index("--max-model-len") + 1] == str(inside.GUIDED_CONTEXT)
        assert argv[argv.index("--load-format") + 1] == "dummy" and argv[argv.index("--port") + 1] == "8000"


def test_the_step_runs_one_program_a_backend_told_its_timeout(tmp_path):
    cmds = inside.step_commands(tmp_path, 900.0)["guided"]
    assert [c[c.index("--backend") + 1] for c in cmds] == list(inside.BACKENDS)
    for c in cmds:
        assert c[2] == "guided" and c[c.index("--within") + 1] == "900" and "sh" not in c
    assert inside.step_env("guided", tmp_path) == inside.RUN_ENV  # eager: no compile cache


def test_the_tokenizer_is_each_byte_then_eos_in_gpt2s_byte_level_alphabet():
    symbols = inside.byte_symbols()
    assert len(symbols) == len(set(symbols)) == 256
    assert (symbols[ord("A")], symbols[ord(" ")], symbols[ord("\n")], symbols[0]) == ("A", "Ġ", "Ċ", "Ā")
    assert symbols[0xAD] == "Ń" and symbols[0xFF] == "ÿ"  # GPT-2's table: 0xad is not printable
    vocab = inside.tokenizer_vocab()
    assert vocab[inside.EOS] == 256 and len(vocab) == 257 and sorted(vocab.values()) == list(range(257))
    assert all(vocab[symbols[b]] == b for b in range(256))


def test_an_answer_within_its_constraint_passes():
    got = inside.judge_answer("json", 200, answer(PET))
    assert got == {"passed": True, "text": PET, "tokens": 9, "finish_reason": "stop"}
    assert inside.judge_answer("regex", 200, answer("abcdef-07"))["passed"] is True
    assert inside.judge_answer("choice", 200, answer("green"))["passed"] is True


@pytest.mark.parametrize(
    ("kind", "text", "why"),
    [
        ("json", '{"name": "Rex", ', "not JSON: Expecting property name"),
        ("json", '{"name":"Re\x1ax"}', "not JSON: Invalid control character"),  # RFC 8259: escaped only
        (
            "json",
            PET.replace('"kind":"dog"', '"kind":"cow"'),
            "does not validate at kind: 'cow' is not one of",
        ),
        ("json", PET.replace(',"tags":["old","calm"]', ""), "does not validate at (the document): 'tags' is"),
        ("json", PET.replace('"oslo"', '"Oslo"'), "does not validate at home/city: 'Oslo' does not match"),
        (
            "json",
            PET.replace('"indoor":true', '"indoor":true,"x":1'),
            "does not validate at home: Additional",
        ),
        ("json", PET.replace('["old","calm"]', '["old","old","old","old"]'), "does not validate at tags:"),
        ("json", PET.replace('["old","calm"]', "[]"), "does not validate at tags: [] should be non-empty"),
        ("regex", "abc-123", "does not fully match the regex"),
        ("regex", " abc-12", "does not fully match the regex"),
        ("choice", "Red", "not one of the choices"),
        ("choice", "red ", "not one of the choices"),
    ],
)
def test_an_answer_outside_its_constraint_fails_and_says_why(kind, text, why):
    got = inside.judge_answer(kind, 200, answer(text))
    assert got["passed"] is False and got["why"].startswith(why), got["why"]
    assert got["text"] == text


def test_an_answer_cut_at_max_tokens_says_so_and_a_long_text_is_bounded():
    body = json.dumps({"choices": [{"text": '{"name": "Rex"', "finish_reason": "length"}], "usage": {}})
    got = inside.judge_answer("json", 200, body)
    assert got["why"].endswith("(finish_reason length)") and got["tokens"] is None
    long = inside.judge_answer("choice", 200, answer("x" * 10_000))
    assert len(long["text"]) < inside.TEXT_CHARS + 10 and long["text"].endswith(" [...]")


def test_a_schema_the_backend_cannot_compile_is_its_failure_with_vllms_message():
    got = inside.judge_answer("json", 400, XGRAMMAR_400)
    message = "The provided JSON schema contains features not supported by xgrammar."
    assert got == {"passed": False, "http_status": 400, "error": message, "why": f"HTTP 400: {message}"}
    result, failures = inside.guided_outcome(
        guided_inside({"xgrammar": XGRAMMAR_400})["result"]["backends"], []
    )
    assert result["backends"]["xgrammar"]["passed"] is False and result["backends"]["outlines"]["passed"]
    assert failures == [f"xgrammar json: HTTP 400: {message}"]


@pytest.mark.parametrize(
    ("status", "body", "why"),
    [
        (500, "Internal Server Error", "HTTP 500: Internal Server Error"),
        (400, '{"error": "a string"}', "HTTP 400: a string"),
        (400, '{"detail": [1]}', 'HTTP 400: {"detail": [1]}'),
        (400, "line one\nline two\t" + "x" * 5000, "HTTP 400: line one line two xxx"),
        (200, "<html>", "the answer is not JSON"),
        (200, '{"choices": []}', "the answer has no text"),
        (200, "[1, 2]", "the answer has no text"),
        (None, "ConnectionRefusedError: [Errno 111] Connection refused", "no answer: ConnectionRefused"),
    ],
)
def test_an_error_or_a_broken_answer_fails_with_a_bounded_one_line_why(status, body, why):
    got = inside.judge_answer("regex", status, body)
    assert got["passed"] is False and got["why"].startswith(why) and "\n" not in got["why"]
    assert len(got["why"]) < inside.ERROR_CHARS + 20


def test_the_results_are_found_in_the_log_among_the_servers_lines(tmp_path):
    log = tmp_path / "guided.log"
    xg = {
        "guided": "xgrammar",
        "requests": {},
        "error": "vllm serve exited with status 1 before it was healthy",
    }
    lines = [
        "$ python serve-check.py guided --backend xgrammar",
        "INFO {'backend': 'xgrammar'} {not json}",
        '{"guided": "llama", "requests": {}}',  # not a backend
        json.dumps(xg),
        "x" * 300_000,  # a line longer than a read: cut, not a result
        json.dumps({"guided": "guidance", "requests": {k: {"passed": True} for k in inside.KINDS}}),
    ]
    log.write_text("\n".join(lines) + "\n")
    found = inside.guided_results(log)
    assert set(found) == {"xgrammar", "guidance"}
    programs = [{"exit_status": 1, "timed_out": False}, {"exit_status": 0, "timed_out": False}]
    programs.append({"exit_status": None, "timed_out": True})
    result, failures = inside.guided_outcome(found, programs)
    assert [b["passed"] for b in result["backends"].values()] == [False, True, False]
    assert failures == [
        "xgrammar: vllm serve exited with status 1 before it was healthy",
        "outlines: stopped at its timeout before it printed a result",
    ]
    _, failures = inside.guided_outcome({}, [])
    assert failures == [f"{b}: not run" for b in inside.BACKENDS]


FAKE_VLLM = """
import http.server, json, sys
port, said = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        open(said, "a").write(json.dumps(body) + "\\n")
        so = body["structured_outputs"]
        doc = {"choices": [{"text": "ab-12", "finish_reason": "stop"}], "usage": {"completion_tokens": 6}}
        code = 200
        if "json" in so:
            code, doc = 400, json.loads(sys.argv[3])
        if "choice" in so:
            doc["choices"][0]["text"] = "purple"
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_guided(tmp_path, monkeypatch, capsys, server: list[str], within: float) -> tuple[int, dict]:
    port = free_port()
    monkeypatch.setattr(inside, "save_tokenizer", lambda path: path.mkdir(parents=True, exist_ok=True))
    monkeypatch.setattr(inside, "guided_server", lambda *a: [*server, str(port)])
    monkeypatch.setattr(inside, "HEALTH_POLL", 0.1)
    args = inside.argparse.Namespace(
        backend="xgrammar", model=str(tmp_path / "m"), tokenizer=str(tmp_path / "t"), port=port, within=within
    )
    rc = inside.guided(args)
    return rc, inside.last_json(capsys.readouterr().out)


def test_one_backend_against_a_server_that_refuses_a_schema_and_answers_off_choice(
    tmp_path, monkeypatch, capsys
):
    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE_VLLM)
    said = tmp_path / "said.jsonl"
    # the fake takes PORT SAID BODY; guided_server's stand-in appends the port last: a shim orders them
    shim = tmp_path / "shim.py"
    shim.write_text(
        "import sys, runpy\n"
        f"sys.argv = [{str(script)!r}, sys.argv[-1], {str(said)!r}, {XGRAMMAR_400!r}]\n"
        f"runpy.run_path({str(script)!r}, run_name='__main__')\n"
    )
    server = [sys.executable, str(shim)]
    rc, result = run_guided(tmp_path, monkeypatch, capsys, server, within=120)
    assert rc == 1 and result["guided"] == "xgrammar" and result["passed"] is False
    assert result["startup_seconds"] >= 0 and result["mode"] == "eager"
    reqs = result["requests"]
    assert reqs["json"]["error"] == "The provided JSON schema contains features not supported by xgrammar."
    assert reqs["regex"]["passed"] is True and reqs["regex"]["tokens"] == 6
    assert reqs["choice"] == {**reqs["choice"], "passed": False, "why": "not one of the choices"}
    sent = [json.loads(x) for x in said.read_text().splitlines()]
    assert sent == [inside.guided_body(k) for k in inside.KINDS]
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["max_position_embeddings"] == inside.GUIDED_CONTEXT and config["eos_token_id"] == 256


def test_a_server_that_never_becomes_healthy_is_stopped_within_the_backends_time(
    tmp_path, monkeypatch, capsys
):
    import signal
    import time

    t0 = time.monotonic()
    server = [sys.executable, "-c", "import time, sys; time.sleep(600)"]
    # as in a job started in a shell's background, which inherits SIGINT ignored: the server still takes it
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        rc, result = run_guided(tmp_path, monkeypatch, capsys, server, within=2)
    finally:
        signal.signal(signal.SIGINT, before)
    assert time.monotonic() - t0 < 30
    assert rc == 1 and result["error"] == "vllm serve was not healthy within 1 s" and result["requests"] == {}
    # a server that refuses to start: its raised error said, its lines copied to the step's log
    refuses = "print('INFO up'); print('ValueError: no backend named x'); print('bye'); raise SystemExit(4)"
    rc, result = run_guided(tmp_path, monkeypatch, capsys, [sys.executable, "-c", refuses], within=60)
    assert rc == 1 and result["error"] == (
        "vllm serve exited with status 4 before it was healthy: ValueError: no backend named x"
    )
    rc, result = run_guided(tmp_path, monkeypatch, capsys, [sys.executable, "-c", "raise SystemExit(5)"], 60)
    assert result["error"] == "vllm serve exited with status 5 before it was healthy"


def test_why_a_server_refused_is_its_last_raised_error_else_its_last_line():
    lines = [
        "INFO a",
        "  File x, line 3",
        "ValueError: one",
        "RuntimeError: Engine core failed: two",
        "",
        " ",
    ]
    assert inside.refusal(lines) == "RuntimeError: Engine core failed: two"
    assert inside.refusal(["INFO a", "killed\tnow "]) == "killed now"
    assert (
        inside.refusal([]) == ""
        and len(inside.refusal(["KeyError: " + "x" * 9000])) < inside.ERROR_CHARS + 10
    )


# ------------------------------------------------------------------------------------------- the host's
def guided_record(tmp_path, bad: dict[str, str]) -> dict:
    doc = make_record(
        tmp_path, {**ALL_PASS, "guided": "failed" if bad else "passed"}, exit_status=int(bool(bad))
    )
    if bad:  # the container's record of a failed guided step, read back as the host does
        steps = {s["name"]: s for s in doc["steps"]}
        raw = {**steps["guided"], **guided_inside(bad)}
        steps["guided"].update(servecheck.guided_step(raw))
        doc["figures"] = servecheck.figures(doc["steps"])
    return doc


def test_result_json_holds_each_backends_answers_and_figures(tmp_path):
    doc = guided_record(tmp_path, {})
    validate(doc, manifest.schema("serve-check"))
    g = doc["steps"][7]
    assert g["name"] == "guided" and g["status"] == "passed" and g["failures"] == []
    assert list(g["result"]["backends"]) == list(inside.BACKENDS)
    xg = g["result"]["backends"]["xgrammar"]
    assert xg["passed"] and xg["requests"]["json"]["text"] == PET and xg["requests"]["json"]["tokens"] == 9
    assert doc["figures"]["guided"]["outlines"] == {
        "startup_seconds": 300.0,
        "json_seconds": 2.5,
        "regex_seconds": 2.5,
        "choice_seconds": 2.5,
    }
    from rvport.cli.closure_verbs import figures_lines

    assert "guided xgrammar: pass, ready in 300.0 s (json pass, regex pass, choice pass)" in figures_lines(
        doc
    )


def test_a_refused_schema_fails_the_check_naming_the_backend_the_request_and_vllms_message(tmp_path):
    doc = make_record(tmp_path, {**ALL_PASS, "guided": "failed"}, exit_status=1)
    inside_steps = {s["name"]: s for s in doc["steps"]}
    got = {
        "name": "guided",
        "status": "failed",
        "log": "guided.log",
        **guided_inside({"xgrammar": XGRAMMAR_400}),
    }
    inside_steps["guided"].update(servecheck.guided_step(got))
    doc["passed"] = False
    validate(doc, manifest.schema("serve-check"))
    text = servecheck.failure(doc, tmp_path / "out").render()
    assert "guided: failed (xgrammar outside the constraint or refused):" in text
    assert (
        "xgrammar json: HTTP 400: The provided JSON schema contains features not supported by xgrammar."
        in text
    )


def test_the_hosts_reading_bounds_what_the_container_wrote(tmp_path):
    hostile = {
        "name": "guided",
        "status": "passed",  # it says passed, but a backend did not
        "result": {
            "backends": {
                "xgrammar": {
                    "passed": True,
                    "startup_seconds": "soon",
                    "requests": {
                        "json": {"passed": True, "text": "x" * 100_000, "tokens": 1.5, "seconds": -1},
                        "regex": {"passed": "yes"},
                        "choice": {"passed": True, "why": 7, "extra": "dropped"},
                    },
                    "server": ["a", 1],
                    "error": "e\x1b[31m" * 1000,
                },
                "guidance": "not a dict",
                "extra": {"passed": True},
            }
        },
        "failures": ["\x1b[2J forged", 5] * 40,
        "programs": [{"exit_status": True, "timed_out": "no", "seconds": 1e12}] * 9,
    }
    step = servecheck.guided_step(hostile)
    backends = step["result"]["backends"]
    assert list(backends) == list(servecheck.GUIDED_BACKENDS) and not any(
        b["passed"] for b in backends.values()
    )
    xg = backends["xgrammar"]
    assert (
        len(xg["requests"]["json"]["text"]) < servecheck.TEXT_CHARS + 10
        and "tokens" not in xg["requests"]["json"]
    )
    assert "seconds" not in xg["requests"]["json"] and xg["requests"]["regex"]["why"] == "no verdict"
    assert "extra" not in xg["requests"]["choice"] and "server" not in xg and "startup_seconds" not in xg
    assert len(xg["error"]) < servecheck.ERROR_CHARS + 10
    assert backends["guidance"]["error"] == "the container reported nothing of this backend"
    assert len(step["failures"]) <= 32 + 3 and all("\x1b" not in f for f in step["failures"])
    assert step["programs"] == [{"exit_status": None, "timed_out": False, "seconds": None}] * 3
    doc = make_record(tmp_path, ALL_PASS)
    steps = {s["name"]: s for s in doc["steps"]}
    steps["guided"].update(step)
    doc["figures"] = servecheck.figures(doc["steps"])
    validate(doc, manifest.schema("serve-check"))
    # and steps_record fails a guided step that said it passed while a backend did not
    logs = tmp_path / "out" / "logs"
    rec = servecheck.steps_record({"steps": [hostile]}, logs, False)
    assert next(s for s in rec if s["name"] == "guided")["status"] == "failed"
