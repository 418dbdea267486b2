"""The README's Python examples run as written and print what they say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 2, "the README should show the secure sum and the accountant"
    for block in blocks:
        namespace: dict[str, object] = {}
        exec(compile(block, str(README), "exec"), namespace)
        # A `print(...)  # expected` line must print exactly the expected text.
        for expected in re.findall(r"^print\(.*\)\s+# (.*)$", block, flags=re.MULTILINE):
            assert capsys.readouterr().out.strip() == expected.strip()
        if "secure_sum" in block:
            assert namespace["result"].total.tolist() == [9, 12]  # type: ignore[attr-defined]
