"""Rendering RESULTS.md from the discovery JSON (``benchmarks.discovery_report``)."""

from benchmarks.discovery_report import (
    _sections_not_in,
    arms_by_seed_count,
    seeds_caption,
)


def _report(seeds_by_arm: dict[str, int]) -> dict:
    return {"seeds": 5, "config": {"arms": list(seeds_by_arm)},
            "arms": {arm: {"per_seed": {"seeds": list(range(n))}} for arm, n in seeds_by_arm.items()}}


def test_arms_rerun_with_fewer_seeds_are_captioned_apart():
    report = _report({"bo": 20, "random": 20, "llm": 5, "llm-shuffled": 5})
    assert arms_by_seed_count(report) == {20: ["bo", "random"], 5: ["llm", "llm-shuffled"]}
    assert seeds_caption(report) == "20 seeds (llm, llm-shuffled: 5)"
    assert seeds_caption(_report({"bo": 20})) == "20 seeds"


def test_sections_other_benchmarks_wrote_survive_a_render():
    template = "# Results\n\n## Discovery efficiency\n\n{{TABLES}}\n"
    previous = ("# Results\n\n## Discovery efficiency\n\nold tables\n\n## Orchestration speed\n\nkept\n\n"
                "## Orchestration speed and scale\n\nalso kept\n")
    assert _sections_not_in(previous, template) == ("## Orchestration speed\n\nkept\n\n"
                                                    "## Orchestration speed and scale\n\nalso kept\n")
    assert _sections_not_in("## Discovery efficiency\n", template) == ""
