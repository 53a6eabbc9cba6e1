"""The README's notebook snippet runs as written (load the fine-tuned model.keras, predict on text, classify,
fine-tune and evaluate on text), against a tiny `bert-keras finetune` run in runs/sst2 of a scratch folder; the
README's export commands work from that one file, and `bert-keras serve` serves the export. The finetune, the
fp32 export and serve run as the command a user runs (a process of their own, TF_CPP_MIN_LOG_LEVEL unset), and
print no line of TensorFlow's own logging (issue 48: no cuInit error on a CPU-only machine, no start-up notices).
The README stays a page for users (at most 250 lines), and what README.md and docs/*.md point at exists: relative
links and their #anchors, repository paths, and every `bert-keras` command line parses with the command's own
parser."""

import pathlib
import re
import shlex
import signal
import socket
import subprocess
import sys

import pytest

from bert_keras.data import SAMPLES
from conftest import REPO
from tensorflow_log_lines import command_env, tensorflow_log_lines

BERT_KERAS = str(pathlib.Path(sys.executable).parent / "bert-keras")
STDERR = {}                 # command -> its stderr, from the runs below


def bert_keras(*args, **kwargs) -> subprocess.CompletedProcess:
    """`bert-keras ARGS` as a user's shell runs it; its stderr is kept in STDERR under the command's name."""
    run = subprocess.run([BERT_KERAS, *map(str, args)], capture_output=True, text=True, env=command_env(),
                         timeout=900, **kwargs)
    assert run.returncode == 0, run.stderr[-3000:]
    STDERR[args[0]] = run.stderr
    return run


def readme_block(marker: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    after = text[text.index(marker):]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


@pytest.fixture(scope="module")
def workdir(minilm_vocab, tmp_path_factory):
    """A scratch folder holding runs/sst2, a tiny `bert-keras finetune` run (what the README's commands assume)."""
    folder = tmp_path_factory.mktemp("readme")
    bert_keras("finetune", "--quiet", "--task", "sst-2", "--model", "bert_tiny", "--vocab", minilm_vocab,
               "--train", f"{SAMPLES}/sst2_train.tsv", "--out", folder / "runs" / "sst2", "--epochs", "1",
               "--batch-size", "16", "--max-train-examples", "64")
    return folder


@pytest.mark.integration
def test_notebook_snippet_runs_as_written(workdir):
    code = readme_block("<!-- tested: tests/test_readme.py")
    assert 'load_model("runs/sst2/model.keras")' in code and ".fit(" in code and ".classify(" in code
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=workdir,
                         env={"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.mark.integration
def test_every_command_works_from_the_one_file(workdir, tmp_path):
    """`bert-keras export` (also --precision int8) and `export-hub` take the finetune run's model.keras alone; `bert-keras
    serve` answers with the fp32 export's labels."""
    import keras
    import numpy as np

    from bert_keras_cli.main import main
    from savedmodels.session_bundle import SessionBundle
    run = workdir / "runs" / "sst2"
    assert sorted(p.name for p in run.iterdir() if p.is_file()) == ["metrics.json", "model.keras",
                                                                    "training_curves.png"]
    model = keras.models.load_model(run / "model.keras")
    texts = ["a gorgeous film", "a waste of time", ""]
    for name, flags in (("fp32", []), ("int8", ["--precision", "int8"])):
        argv = ["export", "--model", str(run / "model.keras"), "--base-path", str(tmp_path / "serving"),
                "--name", name, *flags]
        if name == "fp32":
            bert_keras(*argv)                           # the command's own process (its stderr is checked below)
        else:
            assert main(argv) == 0
        served = SessionBundle(str(tmp_path / "serving" / name / "1")).run("serving_default", {"text": texts})
        np.testing.assert_allclose(served["logits"], model.predict(texts, verbose=0), atol=1e-5 if name == "fp32"
                                   else 0.05)
    assert (tmp_path / "serving" / "batching_parameters.txt").exists()
    assert main(["export-hub", "--model", str(run / "model.keras"), "--out", str(tmp_path / "hub")]) == 0
    labels = serve_and_ask(tmp_path / "serving" / "fp32", texts)
    assert labels == [model.label_names[i] for i in model.predict(texts, verbose=0).argmax(-1)]
    for command in ("finetune", "export", "serve"):
        assert tensorflow_log_lines(STDERR[command]) == [], f"bert-keras {command}:\n{STDERR[command][-3000:]}"


def serve_and_ask(base_path, texts) -> list[str]:
    """`bert-keras serve BASE_PATH` in its own process, asked over gRPC, then stopped as a user stops it (Ctrl-C);
    its stderr is kept in STDERR["serve"]. Returns the labels it answered."""
    from savedmodels.client import ServingClient
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([BERT_KERAS, "serve", f"sst2={base_path}", "--port", str(port)], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=command_env())
    try:
        line = server.stdout.readline()                 # "serving sst2 on 127.0.0.1:PORT ...", once it listens
        assert line.startswith("serving sst2"), line + server.stderr.read()[-3000:]
        outputs = ServingClient(f"127.0.0.1:{port}", "sst2").predict({"text": texts})
    finally:
        server.send_signal(signal.SIGINT)
        _, STDERR["serve"] = server.communicate(timeout=120)
    assert server.returncode == 0, STDERR["serve"][-6000:]      # a stop that hung: the threads' stacks are here
    return [label.decode() for label in outputs["label"]]


MARKDOWN = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
TOP_FOLDERS = ("bert_keras", "bert_keras_cli", "savedmodels", "benchmarks", "tools", "tests", "notebooks", "docs")


def markdown(name: str) -> str:
    return (REPO / name).read_text(encoding="utf-8")


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_readme_is_a_page_for_users():
    lines = markdown("README.md").count("\n")
    assert lines <= 250, f"README.md has {lines} lines: keep it at most 250, move details to docs/"


@pytest.mark.parametrize("name", MARKDOWN)
def test_relative_links_point_to_files_and_headings_that_exist(name):
    text = re.sub(r"```.*?```", "", markdown(name), flags=re.S)
    links = re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text)
    assert links or name != "README.md"
    broken = []
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = (REPO / name).parent / path if path else REPO / name
        if not target.exists():
            broken.append(f"{link}: no file {target.relative_to(REPO)}")
        elif anchor and target.suffix == ".md" and anchor not in heading_anchors(target.read_text("utf-8")):
            broken.append(f"{link}: no heading #{anchor} in {target.relative_to(REPO)}")
    assert not broken, f"{name}: " + "; ".join(broken)


def named_paths(text: str) -> set[str]:
    """Repository paths a page names (`benchmarks/x.py`, `tools/parity/x.py`, ...), less what runs write
    (benchmarks/results/) and patterns (a name running on into `<task>`, `{0..3}` or `*`)."""
    found = set()
    for match in re.finditer(r"(?<![\w./-])(?:%s)/[\w./-]*" % "|".join(TOP_FOLDERS), text):
        path = match.group().rstrip(".")
        if not path.startswith("benchmarks/results") and text[match.end():match.end() + 1] not in "<{*":
            found.add(path)
    return found


@pytest.mark.parametrize("name", MARKDOWN)
def test_repository_paths_named_exist(name):
    missing = sorted(path for path in named_paths(markdown(name)) if not (REPO / path).exists())
    assert not missing, f"{name} names paths that do not exist: {missing}"


def command_lines(text: str, program: str) -> list[str]:
    """The `program ...` lines of the page's bash blocks, continuation lines joined, comments dropped."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith(program + " "):
                lines.append(line)
    return lines


def test_every_bert_keras_command_in_the_docs_parses():
    from bert_keras_cli.main import parse_command_line
    commands = [(name, line) for name in MARKDOWN for line in command_lines(markdown(name), "bert-keras")]
    assert len(commands) >= 20
    failed = []
    for name, line in commands:
        argv = shlex.split(line, comments=True)[1:]
        try:
            parse_command_line(argv)              # as `bert-keras` parses them (Beam's options with --runner)
        except SystemExit:
            failed.append(f"{name}: {line}")
    assert not failed, "commands the CLI refuses:\n" + "\n".join(failed)
