"""Environments: where a probe's test ran, and which two verdicts may be paired."""
from __future__ import annotations

from bisect_ngc.environments import HOST, Environment, of_probe, paired, unpaired
from bisect_ngc.search import Result, Status

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
    assert of_probe("build", "", None).show() == "a build wheel on this host"


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
