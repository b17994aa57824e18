"""CI runs the README's test command and nothing else: `.ci/run` = `.ci/setup` + that command.

The README's "Tests" section gives two commands in one ```sh block: the setup, then the test command.
`.ci/run`'s commands (its lines that are neither comments, shell options nor `cd`) must be exactly
those two, in that order; a change to either side alone fails here.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands(text: str) -> list[str]:
    """The commands of the first ```sh block after the `## Tests` heading."""
    section = text.split("\n## Tests", 1)[1]
    block = re.search(r"^```sh\n(.*?)^```", section, re.M | re.S)
    assert block, "README.md's Tests section has no ```sh block with the setup and test commands"
    return [line.strip() for line in block[1].splitlines() if line.strip() and not line.lstrip().startswith("#")]


def ci_commands(text: str) -> list[str]:
    commands = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith(("set ", "cd ")):
            continue
        commands.append(line)
    return commands


def test_ci_runs_the_readme_commands():
    readme = readme_commands((ROOT / "README.md").read_text())
    ci = ci_commands((ROOT / ".ci" / "run").read_text())
    assert len(readme) == 2, f"README.md's Tests block should hold the setup and the test command, has {readme}"
    assert ci == readme, (f".ci/run runs {ci}, README.md says {readme}: CI must run exactly the README's "
                          "setup and test command")


def test_the_parsers_see_a_difference():
    readme = "x\n## Tests\n\ntext\n\n```sh\nbash .ci/setup\n.venv/bin/python -m pytest -x\n```\n"
    ci = "#!/usr/bin/env bash\nset -euo pipefail\ncd here\nbash .ci/setup\n.venv/bin/python -m pytest\n"
    assert readme_commands(readme) == ["bash .ci/setup", ".venv/bin/python -m pytest -x"]
    assert ci_commands(ci) == ["bash .ci/setup", ".venv/bin/python -m pytest"]
    assert readme_commands(readme) != ci_commands(ci)
