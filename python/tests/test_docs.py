"""docs/python.md shows real files, run here; the example runs and checks itself against numpy."""

import re
import runpy
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def snippet_blocks(markdown):
    pattern = re.compile(r"<!-- snippet: (\S+) -->\n```python\n(.*?)```\n<!-- end snippet -->", re.S)
    return pattern.findall(markdown.read_text())


def test_python_md_shows_each_snippet_verbatim():
    blocks = snippet_blocks(ROOT / "docs" / "python.md")
    assert len(blocks) >= 1
    for path, body in blocks:
        assert (ROOT / path).read_text() == body, f"docs/python.md differs from {path}"


def test_every_python_snippet_runs(capsys):
    for path, _ in snippet_blocks(ROOT / "docs" / "python.md"):
        runpy.run_path(str(ROOT / path), run_name="__main__")
    assert "lap_of_lap at (5, 5, 0): 20.0" in capsys.readouterr().out


def test_the_example_checks_itself_against_numpy_and_prints_timings():
    example = ROOT / "python" / "examples" / "hdiff_and_mesh.py"
    result = subprocess.run([sys.executable, str(example), "--small"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert re.search(r"hdiff 16x16x8: fieldflow [\d.]+ ms, numpy [\d.]+ ms", result.stdout)
    assert re.search(r"divergence on a 16x16 torus \(512 cells\) x 8 levels: fieldflow [\d.]+ ms", result.stdout)
