"""The README is what a first visit needs, and every claim in it holds: the two set-up commands first,
the demo's report as shown, the links to the documentation pages."""

from __future__ import annotations

import re

from cli_runner import REPO, check

README = (REPO / "README.md").read_text(encoding="utf-8")


def test_the_first_lines_are_the_two_set_up_commands() -> None:
    assert README.startswith(
        "# cachelint\n\n```sh\npip install . && cachelint check fixtures/demo\npip install '.[test]' && pytest\n```\n"
    )


def test_the_example_is_what_the_demo_prints() -> None:
    """The report as shown, but for the two CL004 findings the README leaves out (and says so)."""
    shown = re.search(r"`cachelint check fixtures/demo`:\n\n```text\n(.*?)```", README, re.DOTALL)
    assert shown is not None
    assert "(Two CL004 findings are left out above.)" in README
    result = check("fixtures/demo", "--no-cache", "--no-color", cwd=REPO)
    assert result.code == 1  # "it reports five problems and exits 1"
    assert "Found 5 problems in 2 files." in result.stdout
    blocks = result.stdout.split("\n\n")
    kept = [block for block in blocks if not re.match(r"\S+:\d+:\d+: CL004 ", block)]
    assert len(kept) == len(blocks) - 2
    assert "\n\n".join(kept) == shown.group(1)


def test_every_relative_link_names_a_file_of_the_repository() -> None:
    links = re.findall(r"\]\(([^)#\s]+)\)", README)
    local = [link for link in links if "://" not in link]
    assert {"docs/index.md", "docs/rules.md", "docs/ci.md", "docs/editors.md"} <= set(local)
    for link in local:
        assert (REPO / link).exists(), link
