"""What grows with the input stays right at sizes where a cost growing with the square of the input
would take minutes: many weight-update names, many findings, many fixes in one file. How the cost grows
is measured by bench/inputs_bench.py, not here."""

from __future__ import annotations

import ast
import io
import random
import re
import time
from pathlib import Path

import pytest
from cli_runner import DEMO

from cachelint.config import DEFAULT_REFIT_FUNCTIONS, Settings
from cachelint.engine import ANY_CASE_WORDS, TRIGGER_PATTERNS, TRIGGER_WORDS, LoadedFile, Triggers, analyze, defined_in
from cachelint.finding import Applicability, Edit, Finding, Fix, Span
from cachelint.fixes import fix_to_fixed_point
from cachelint.output import ReportContext, render
from cachelint.summary.nodes import last_name
from cachelint.version_tests import dotted_name
from cachelint.word_search import WordSearch

CORPUS = [path.read_bytes() for path in sorted((DEMO.parent).rglob("*.py"))]


def holds_a_trigger(raw: bytes, names: list[str]) -> bool:
    """The definition: one of TRIGGER_WORDS, or `def NAME`, is in the bytes, or the word of one of
    TRIGGER_PATTERNS is and its pattern matches them."""
    return any(word in raw for word in (*TRIGGER_WORDS, *(f"def {name}".encode() for name in names))) or any(
        word in raw and pattern.search(raw) for word, pattern in TRIGGER_PATTERNS
    )


def test_trigger_words_are_found_exactly_as_defined() -> None:
    defined = sorted({word.decode() for raw in CORPUS for word in re.findall(rb"def (\w+)", raw)})
    chooser = random.Random(20)
    for _ in range(30):
        names = chooser.sample(defined, 4) + [
            name[: chooser.randint(1, len(name))] for name in chooser.sample(defined, 4)
        ]
        names += chooser.sample(["push-weights", "naïve_refit", "a.b", "", "sync weights", *DEFAULT_REFIT_FUNCTIONS], 2)
        triggers = Triggers(names)
        for raw in CORPUS:
            assert triggers.held_by(raw) == holds_a_trigger(raw, names), names


def test_words_sharing_a_part_are_found_exactly_as_one_by_one() -> None:
    chooser = random.Random(7)
    words = sorted({word for raw in CORPUS for word in re.findall(rb"[a-z_]{6,}", raw)})
    for _ in range(30):
        chosen = [*chooser.sample(words, 8), b"_cache", b"reset_prefix_cache", b"sleep("]
        parts = [word[1:4] for word in chooser.sample(chosen, 3)]
        search = WordSearch(chosen, parts)
        for raw in CORPUS:
            assert search.any_in(raw) == any(word in raw for word in chosen)
            expected = sorted((raw.find(word), word) for word in chosen if word in raw)
            assert sorted(search.found_in(raw)) == expected


def test_words_looked_for_in_any_case_are_found_as_in_the_lowered_bytes() -> None:
    """One lowered copy of a file's bytes answers for every word of ANY_CASE_WORDS (suppression
    directives, SGLang's name), whatever the case each is spelled in."""
    chooser = random.Random(11)
    for raw in CORPUS:
        for _ in range(4):
            word = chooser.choice(ANY_CASE_WORDS)
            spelled = bytes(letter ^ 0x20 if chooser.random() < 0.5 else letter for letter in word)
            variant = raw + b"\n# " + spelled if chooser.random() < 0.7 else raw
            loaded = LoadedFile("x.py", "x.py", contents=variant)
            for known in ANY_CASE_WORDS:
                assert loaded.holds_any_case(known) == (known in variant.lower()), (known, spelled)


def test_a_calls_last_name_is_the_last_part_of_its_dotted_name() -> None:
    """`last_name` reads what `dotted_name` would build, for every expression of the fixture corpus and
    for odd shapes (a call's attribute, a subscript's, a name)."""
    odd = [ast.parse(text, mode="eval").body for text in ("f().x", "a[0].b.c", "a.b().c", "x", "a.b", "(1).real")]
    expressions = [node for raw in CORPUS for node in ast.walk(ast.parse(raw)) if isinstance(node, ast.expr)]
    for node in [*odd, *expressions]:
        dotted = dotted_name(node)
        assert last_name(node) == (dotted.rsplit(".", 1)[-1] if dotted else ""), ast.dump(node)


def test_the_words_a_file_defines_are_those_def_or_class_names_exactly() -> None:
    """`def name\\b` or `class name\\b` matches exactly for the words `defined_in` gives (the on-demand
    search looks up files by them), in the corpus and in text where `def ` or `class ` ends a word."""
    odd = b"undef foo\ndataclass class is\ndef abcdef x\nclass class  def def(\ndef \xc3\xa9t\xc3\xa9 def _1"
    every_word = sorted({word for raw in CORPUS for word in re.findall(rb"\w+", raw, re.ASCII)})
    words = {*random.Random(3).sample(every_word, 200), *re.findall(rb"\w+", odd, re.ASCII)}
    for raw in (*CORPUS, odd):
        words.update(re.findall(rb"(?:def|class) (\w+)", raw, re.ASCII))
    for raw in (*CORPUS, odd):
        found = set(defined_in(raw))
        for word in words:
            defines = re.search(rb"(?:def|class) " + word + rb"\b", raw) is not None
            assert (word.decode() in found) is defines, (word, raw[:60])


@pytest.mark.parametrize(
    ("source", "holds"),
    [
        (b"from vllm import AsyncLLM\nasync def f(engine: AsyncLLM):\n    engine.wake_up()\n", True),
        (b"def f(client: 'EngineClient'):\n    client.sleep(1)\n", True),
        (b"fn = engine.resume_generation  # engine: AsyncLLM\n", True),
        (b"from vllm import AsyncLLM\nengine = AsyncLLM.from_engine_args(args)\nengine.generate(p)\n", False),
        (b"def build(client: 'EngineClient'):\n    return client.generate(prompt)\n", False),
    ],
)
def test_an_engine_class_is_a_trigger_word_where_one_of_its_other_coroutines_is_named(
    source: bytes, holds: bool
) -> None:
    """AsyncLLM and EngineClient let CL005 judge a receiver's coroutines; those a trigger word does not
    name already are `sleep`, `wake_up` and `resume_generation`."""
    assert Triggers(()).held_by(source) is holds


def test_fifty_thousand_weight_update_names(tmp_path: Path) -> None:
    names = [f"push_weights_{index}" for index in range(50_000)]
    source = b"class Trainer:\n    def push_weights_49999(self, engine):\n        return engine\n"
    triggers = Triggers(names)
    assert triggers.held_by(source)
    assert not triggers.held_by(source.replace(b"push", b"pull"))
    every_name = re.compile(rb"def push_weights_[0-9]")  # each holds `def push_weights_` and one of the names
    expected = [every_name.search(raw) is not None or holds_a_trigger(raw, []) for raw in CORPUS]
    assert [triggers.held_by(raw) for raw in CORPUS] == expected
    (tmp_path / "trainer.py").write_bytes(source)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\n', encoding="utf-8")
    settings = Settings(extend_refit_functions=tuple(names))
    analysis = analyze([tmp_path], settings)
    assert analysis.findings == []


def test_full_output_of_twenty_thousand_findings_in_one_file() -> None:
    count = 20_000
    source = (
        "class Worker:\n    def update_weights(self):\n" + "        self.model_runner.reset_encoder_cache()\n" * count
    )
    findings = [
        Finding(
            "worker.py",
            Span(3 + index, 9, 3 + index, 48),
            "CL001",
            "worker-only-cache-reset",
            "a message",
            help="a help",
        )
        for index in range(count)
    ]
    out = io.StringIO()
    render(findings, "full", out, ReportContext(root=Path(), sources={"worker.py": source}))
    assert out.getvalue().count("^ CL001\n") == count
    assert f"{count + 2} |         self.model_runner.reset_encoder_cache()\n" in out.getvalue()


def test_shown_fixes_of_five_thousand_findings_in_one_file() -> None:
    count = 5_000
    block = "    if VLLM >= (0, 17):\n        engine.reset_encoder_cache()\n\n"
    source = "def sleep(engine):\n" + block * count
    findings = []
    for index in range(count):
        line = 2 + 3 * index
        edits = (
            Edit("server.py", Span(line, 1, line + 1, 1), ""),
            Edit("server.py", Span(line + 1, 1, line + 1, 5), ""),
        )
        fix = Fix("drop the gate", Applicability.SAFE, edits)
        findings.append(
            Finding("server.py", Span(line + 1, 9, line + 1, 37), "CL002", "version-gated-reset", "m", fix=fix)
        )
    out = io.StringIO()
    render(findings, "full", out, ReportContext(root=Path(), sources={"server.py": source}, show_fixes=True))
    text = out.getvalue()
    assert text.count("= fix (safe): drop the gate") == count
    last = 2 + 3 * (count - 1)
    assert f"  @@ -{last - 1},4 +{last - 1},3 @@\n" in text  # the hunk's line numbers are the file's
    assert text.count("  -    if VLLM >= (0, 17):\n") == count


# Bounds on the CPU time of this process (the pool is not used): far above what a cost in proportion to
# the input takes, far below what one growing with its square took (4,000 `noqa` lines 6 s, 20,000
# about 3 minutes; `--fix` of 2,000 six minutes; one fix in a file of 30,000 functions 165 s).
UNUSED_NOQA_SECONDS = 30.0
FIX_SECONDS = 60.0
PINNED = '[project]\nname = "p"\nversion = "0"\ndependencies = ["vllm>=0.16,<0.22"]\n'


def unused_noqa_project(root: Path, count: int) -> Path:
    (root / "pyproject.toml").write_text(PINNED, encoding="utf-8")
    (root / "module.py").write_text("".join(f"x{i} = {i}  # noqa: CL001\n" for i in range(count)), encoding="utf-8")
    return root


@pytest.mark.parametrize("count", [4_000, 20_000])
def test_thousands_of_unused_noqa_comments(tmp_path: Path, count: int) -> None:
    project = unused_noqa_project(tmp_path, count)
    started = time.process_time()
    analysis = analyze([project], Settings(), workers=1)
    assert time.process_time() - started < UNUSED_NOQA_SECONDS
    assert [finding.code for finding in analysis.findings] == ["CL100"] * count
    assert analysis.findings[-1].span.line == count


def test_fixing_two_thousand_unused_noqa_comments(tmp_path: Path) -> None:
    project = unused_noqa_project(tmp_path, 2_000)
    started = time.process_time()
    outcome = fix_to_fixed_point([project], Settings(), unsafe=False, workers=1)
    assert time.process_time() - started < FIX_SECONDS
    assert outcome.fixed == 2_000
    (fixed,) = outcome.changed
    assert fixed.text == "".join(f"x{i} = {i}\n" for i in range(2_000))
    assert outcome.analysis.findings == []


def test_one_fix_in_a_file_of_thirty_thousand_functions(tmp_path: Path) -> None:
    gated = (
        "import vllm\nfrom packaging.version import Version\n\n\nasync def reset_caches(engine):\n"
        "    await engine.reset_prefix_cache()\n"
        '    if Version("0.9.0") <= Version(vllm.__version__):\n'
        "        await engine.reset_mm_cache()\n"
    )
    functions = "".join(f"\n\ndef helper_{index}(x):\n    return x + {index}\n" for index in range(30_000))
    (tmp_path / "pyproject.toml").write_text(PINNED, encoding="utf-8")
    (tmp_path / "rollout.py").write_text(gated + functions, encoding="utf-8")
    started = time.process_time()
    outcome = fix_to_fixed_point([tmp_path], Settings(), unsafe=False, workers=1)
    assert time.process_time() - started < FIX_SECONDS
    assert outcome.fixed == 1
    (fixed,) = outcome.changed
    # Every supported release has the reset: the gate goes, its body stays.
    ungated = gated.replace('    if Version("0.9.0") <= Version(vllm.__version__):\n        await', "    await")
    assert fixed.text == ungated + functions
