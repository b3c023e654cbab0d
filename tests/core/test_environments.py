"""Environments: where a probe's test ran, and which two verdicts may be paired."""
from __future__ import annotations

from bisect_ngc.core.environments import HOST, Environment, of_probe, paired, unpaired
from bisect_ngc.core.search import Result, Status

IMAGE = of_probe("image", "nvcr.io/nvidia/pytorch:24.10-py3", "ignored")
BUILT = of_probe("build", "", "nvcr.io/nvidia/pytorch:24.09-py3")


def test_environments_pair_only_probes_that_differ_in_the_probed_commit():
    nightly = of_probe("nightly", "https://x/torch-2.5.whl", "nvcr.io/nvidia/pytorch:24.09-py3")
    elsewhere = of_probe("build", "", "nvcr.io/nvidia/pytorch:24.05-py3")
    assert IMAGE.as_is and not BUILT.as_is
    assert BUILT.comparable(nightly) and nightly.comparable(BUILT)
    assert not IMAGE.comparable(BUILT) and not BUILT.comparable(elsewhere)
    assert of_probe("build", "", None).base == HOST
    assert Environment.from_dict(nightly.as_dict()) == nightly
    assert IMAGE.show() == "the image `nvcr.io/nvidia/pytorch:24.10-py3` as it is"
    assert nightly.show() == "a nightly wheel in `nvcr.io/nvidia/pytorch:24.09-py3`"
    assert of_probe("build", "", None).show() == "the commit's build on this host"
    assert of_probe("build", "", None).show(built=False) == \
        "the commit's worktree (no build) on this host"


def test_a_found_answer_never_rests_on_verdicts_of_two_environments():
    """The engine's last guard against issue 21's worst bug class, a confident wrong
    answer: an image's verdict paired with a build's."""
    found = Result(Status.FOUND, first_new=7, last_old=6, candidates=(7,))
    assert paired(found, {6: BUILT, 7: BUILT}) == found
    answer = paired(found, {6: BUILT, 7: IMAGE})
    assert answer.status is Status.AMBIGUOUS and answer.first_new is None
    assert answer.candidates == (7,) and "24.10-py3" in answer.explanation
    assert answer.explanation == unpaired(BUILT, IMAGE)
    assert paired(found, {6: BUILT}) == found            # records from before environments


def test_every_backend_makes_a_probe_environment_from_one_plan(tmp_path):
    from bisect_ngc.core.probes import ProbeKind, ProbeRequest, Source, test_plan
    from bisect_ngc.core.recipes import Recipe
    from bisect_ngc.core.search import RepeatPolicy
    recipe = Recipe(build="make", test="install && run", test_as_is="run", image="base:1")

    def req(source):
        return ProbeRequest("s", "c" * 40, 1, 0, 1, RepeatPolicy.ANY, tmp_path, tmp_path,
                            source=source)
    image = req(Source(ProbeKind.IMAGE, "ngc:24.10", "NGC 24.10"))
    nightly = req(Source(ProbeKind.NIGHTLY, "https://x/torch.whl", "nightly"))
    built = req(None)
    assert (test_plan(image, recipe).artifacts, test_plan(image, recipe).image,
            test_plan(image, recipe).test) == ("none", "ngc:24.10", "run")
    assert (test_plan(nightly, recipe).artifacts, test_plan(nightly, recipe).image,
            test_plan(nightly, recipe).test) == ("ready", "base:1", "install && run")
    assert test_plan(built, recipe).artifacts == "build" and built.tier is ProbeKind.BUILD
    assert image.environment("base:1") == Environment("ngc:24.10")
    assert not nightly.environment("base:1").comparable(image.environment("base:1"))
    assert nightly.environment("base:1").comparable(built.environment("base:1"))
    assert built.environment(None).base == HOST
