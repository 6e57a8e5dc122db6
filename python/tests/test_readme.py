"""The README's Python section runs as printed: its snippets are read from README.md (so a README that
drifts from the package fails here), each run in a fresh interpreter from the repository root as a
user would paste it. The first snippet runs on the host, and again on every backend its
`instantiate("host")  # or ...` comment names (skipped where that backend is not found: Vulkan needs a
device, lavapipe on a CPU; CUDA a GPU); the PyTorch snippet runs after it where torch and a CUDA GPU
are."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def python_section():
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    assert "\n## From Python\n" in text, "the README has no `## From Python` section"
    return text.split("\n## From Python\n", 1)[1].split("\n## ", 1)[0]


def snippets():
    found = re.findall(r"```python\n(.*?)```", python_section(), re.S)
    assert found, "the README's Python section has no ```python snippet"
    return found


def run(code):
    """Runs `code` in a fresh interpreter (this one's, with the installed package) from the repository root."""
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)


def instantiate_line(code):
    """The snippet's `plan.instantiate("host")` call and the backends its comment names (`# or "a", "b"`)."""
    m = re.search(r'instantiate\("host"\)\s*#\s*or ((?:"\w+"(?:,\s*)?)+)', code)
    assert m, 'the first snippet has no `instantiate("host")  # or "..."` line'
    return re.findall(r'"(\w+)"', m.group(1))


def check_ran(result, code, what):
    assert result.returncode == 0, "%s failed:\n%s" % (what, result.stderr)
    printed = [l for l in result.stdout.splitlines() if l.strip()]
    assert len(printed) >= code.count("print("), "%s printed %r, fewer lines than its print() calls" % (what, result.stdout)


def test_the_first_snippet_runs_as_printed_on_the_host():
    code = snippets()[0]
    assert code.count("print(") >= 1, "the snippet prints nothing"
    check_ran(run(code), code, "the README's Python snippet")


@pytest.mark.parametrize("backend", instantiate_line(snippets()[0]))
def test_the_first_snippet_runs_on_each_backend_its_comment_names(backend):
    code = snippets()[0].replace('instantiate("host")', 'instantiate("%s")' % backend, 1)
    result = run(code)
    if result.returncode != 0 and "BackendMissingError" in result.stderr:
        pytest.skip("no %s device: %s" % (backend, result.stderr.strip().splitlines()[-1]))
    check_ran(result, code, 'the README\'s Python snippet with instantiate("%s")' % backend)


def test_the_torch_snippet_runs_after_the_first():
    rest = snippets()[1:]
    assert rest and "torch" in rest[0], "the README's PyTorch snippet is gone"
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    code = snippets()[0] + rest[0]
    check_ran(run(code), code, "the README's Python snippets, the PyTorch one after the first")
