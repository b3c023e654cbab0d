"""The engine with a scripted backend: resume, cache hits, interruption, failing probes.

The backend is a stand-in (a script of outcomes) so the engine's own rules can be tested
fast; the repository is a real generated one. Real backends are tested elsewhere."""
from __future__ import annotations


import pytest

from tests.lib.repos import make_repo
from bisect_ngc.core.probes import BackendLost, Source
from bisect_ngc.core.verdicts import ProbeOutcome
from bisect_ngc.core.inputs import Range, Settings, Tier
from bisect_ngc.core.engine import Bisection
from bisect_ngc.core.records import tally
from bisect_ngc.vcs.history import History
from bisect_ngc.core.recipes import Recipe
from bisect_ngc.core.search import Verdict
from bisect_ngc.core.records import SessionStatus
from bisect_ngc.core.store import Store
from bisect_ngc.images.image_evidence import ImageEvidence
from tests.lib.fakes import ScriptedBackend


@pytest.fixture
def span(tmp_path):
    shas = make_repo(tmp_path / "r", 64, 40)
    history = History.open(str(tmp_path / "r"), tmp_path / "cache")
    return Range(history, shas[0], shas[-1], shas, history.identity(shas[-1]), {"old": "a"})


def by_index(transition: int, skips=(), cacheable_skips=True):
    def decide(i: int) -> ProbeOutcome:
        if i in skips:
            return ProbeOutcome(Verdict.SKIP, "scripted skip", cacheable=cacheable_skips)
        return ProbeOutcome(Verdict.PASS if i < transition else Verdict.FAIL, runs=[Verdict.PASS])
    return decide


def run(store, span, backend, **settings):
    return Bisection(store, span, Recipe(build=None, test="t"), backend,
                     Settings(**settings)).run()


def test_finds_the_transition_and_a_second_run_probes_nothing(tmp_path, span):
    store = Store(tmp_path / "st")
    first = ScriptedBackend(by_index(40))
    result = run(store, span, first)
    assert result.status == "found" and result.first_new == span.candidates[40]
    search = first.probed[:-6]                 # then the answer's pair, 3 times each
    assert result.n_candidates == 63 and len(search) <= 8
    assert sorted(first.probed[-6:]) == [39, 39, 39, 40, 40, 40]
    again = ScriptedBackend(by_index(40))
    second = run(store, span, again)
    assert second.first_new == result.first_new and sorted(again.probed) == sorted(
        first.probed[-6:])                     # a new session checks the answer afresh
    sid = store.sessions()[0].id
    assert tally(store.probes(sid))["cached"] == len(first.probed) - 6    # less the checks


def test_an_interrupted_session_resumes_without_repeating_probes(tmp_path, span):
    store = Store(tmp_path / "st")
    stopping = ScriptedBackend(by_index(40), stop_after=3)
    with pytest.raises(KeyboardInterrupt):
        run(store, span, stopping)
    rec = store.sessions()[0]
    assert rec.status is SessionStatus.INTERRUPTED and stopping.cancelled == 1
    assert len(store.probes(rec.id)) == 3
    rest = ScriptedBackend(by_index(40))
    result = run(store, span, rest)
    assert result.first_new == span.candidates[40]
    assert not set(rest.probed) & set(stopping.probed)
    assert store.session(rec.id).status is SessionStatus.FOUND


def test_a_transient_outcome_stops_the_session_and_records_nothing(tmp_path, span):
    store = Store(tmp_path / "st")
    backend = ScriptedBackend(lambda i: ProbeOutcome(Verdict.SKIP, "interrupted",
                                                     transient=True))
    with pytest.raises(KeyboardInterrupt):
        run(store, span, backend)
    assert store.probes(store.sessions()[0].id) == []


def test_uncached_skips_are_probed_again_and_cached_ones_only_with_retry_skips(tmp_path, span):
    store = Store(tmp_path / "st")
    skips = {0}          # the old endpoint cannot be tested: invalid endpoints
    flaky = ScriptedBackend(by_index(40, skips, cacheable_skips=False))
    result = run(store, span, flaky)
    assert result.status == "invalid-endpoints"
    assert result.endpoint_reasons == {"old": "scripted skip"}
    fixed = ScriptedBackend(by_index(40))
    assert run(store, span, fixed).status == "found" and 0 in fixed.probed

    store2 = Store(tmp_path / "st2")
    asked = ScriptedBackend(by_index(40, skips, cacheable_skips=True))
    assert run(store2, span, asked).status == "invalid-endpoints"
    cached = ScriptedBackend(by_index(40))
    assert run(store2, span, cached).status == "invalid-endpoints" and 0 not in cached.probed
    retried = ScriptedBackend(by_index(40))
    assert run(store2, span, retried, retry_skips=True).status == "found"
    assert 0 in retried.probed


def test_a_lost_backend_ends_the_session_resumably(tmp_path, span):
    store = Store(tmp_path / "st")

    def decide(i):
        if i not in (0, 63):
            raise BackendLost("lost the engine", hint="start it")
        return by_index(40)(i)

    with pytest.raises(BackendLost):
        run(store, span, ScriptedBackend(decide))
    assert store.sessions()[0].status is SessionStatus.INTERRUPTED
    assert run(store, span, ScriptedBackend(by_index(40))).status == "found"


def test_tiers_go_first_and_a_killed_run_resumes_across_them(tmp_path, span):
    from bisect_ngc.core.probes import Source
    from bisect_ngc.core.inputs import Tier
    tiers = [Tier("nightly", {i: Source("nightly", f"https://w/{i}.whl", f"nightly {i}")
                              for i in range(0, 64, 8)})]

    def bisect(backend):
        return Bisection(Store(tmp_path / "st"), span, Recipe(build=None, test="t"), backend,
                         Settings(), tiers=tiers).run()

    seen: list[str] = []

    def decide(i):
        return by_index(40)(i)

    class Recording(ScriptedBackend):
        def run_round(self, requests, on_phase):
            seen.extend(r.tier for r in requests)
            yield from super().run_round(requests, on_phase)

    first = Recording(decide, stop_after=4)
    with pytest.raises(KeyboardInterrupt):
        bisect(first)
    rest = Recording(decide)
    result = bisect(rest)
    assert result.first_new == span.candidates[40]
    checks = rest.probed[-6:]           # the answer's pair, run again 3 times each
    assert sorted(checks) == [39, 39, 39, 40, 40, 40]
    rest.probed = rest.probed[:-6]
    assert not set(first.probed) & set(rest.probed)
    done = first.probed + rest.probed
    builds = [i for i in done if i % 8]
    nightlies = [k for k, i in enumerate(done) if i % 8 == 0]
    inner = [k for k, i in enumerate(done) if 32 < i < 40]
    assert len(nightlies) >= 3 and "nightly" in seen
    # the new endpoint has no nightly; every other build lies between nightlies 32 and 40,
    # after the last nightly probe
    assert set(builds) - {63} <= set(range(33, 40)) and len(builds) <= 1 + 3
    assert inner and min(inner) > max(nightlies)


def test_one_flaky_image_run_never_ends_the_session_as_not_in_commits(tmp_path, span):
    """Issue 30: the release image at 20 fails once (a flake); the build of its commit
    passes. "Not in these commits" rests on both, so both are run again: the image's
    fresh run passes, and the answer is ambiguous, not exit 5."""
    tiers = [Tier("image", {i: Source("image", f"img{i}", f"NGC {i}") for i in (0, 20, 48, 63)})]
    count: dict[tuple[int, str], int] = {}

    class Flaky(ScriptedBackend):
        def run_round(self, requests, on_phase):
            for r in requests:
                key = (r.index, r.tier.value)
                count[key] = count.get(key, 0) + 1
                v = Verdict.PASS if r.index < 40 else Verdict.FAIL
                if key == (20, "image") and count[key] == 1:
                    v = Verdict.FAIL
                yield r, ProbeOutcome(v, runs=[v])

    result = Bisection(Store(tmp_path / "st"), span, Recipe(build=None, test="t"),
                       Flaky(by_index(40)), Settings(), tiers=tiers,
                       images=ImageEvidence(tiers, span.candidates, jobs=1)).run()
    assert result.status == "ambiguous" and "#20 (image)" in result.explanation, result
    assert count[(20, "image")] == 2 and count[(20, "build")] >= 2


def test_while_a_round_of_images_runs_the_next_round_s_images_are_prefetched(tmp_path, span):
    """Release images at 0, 10, 20, 30, 40, 50 and 63: while the endpoints run, both
    possible next images (the subset's midpoints either way) are asked for; each later
    round asks for the images the round after it may need, never one it runs itself."""
    at = (0, 10, 20, 30, 40, 50, 63)
    tiers = [Tier("image", {i: Source("image", f"img{i}", f"NGC {i}") for i in at})]
    backend = ScriptedBackend(by_index(40))
    order: list[tuple[str, object]] = []
    prefetch, run_round = backend.prefetch, backend.run_round
    backend.prefetch = lambda images, done=False: (
        order.append(("prefetch", list(images))), prefetch(images, done=done))[1]
    backend.run_round = lambda reqs, on_phase: (order.append(("run", [r.index for r in reqs])),
                                                run_round(reqs, on_phase))[1]
    Bisection(Store(tmp_path / "st"), span, Recipe(build=None, test="t"), backend, Settings(),
              tiers=tiers, images=ImageEvidence(tiers, span.candidates, jobs=1)).run()
    assert order[0][0] == "prefetch" and order[1] == ("run", [0])       # one job: one a batch
    assert order[0][1] and set(order[0][1]) <= {f"img{i}" for i in at[1:-1]}
    runs = [r for kind, r in order if kind == "run"]
    fetched = [set(p) for kind, p in order if kind == "prefetch"]
    for later in runs[1:]:
        images = {f"img{i}" for i in later if i in at[1:-1]}     # past the endpoints
        assert not images or any(images <= f for f in fetched), (later, fetched)
    assert backend.prefetch_done           # the answer found: nothing more is fetched
    again = ScriptedBackend(by_index(40))      # every verdict cached: no image is pulled
    Bisection(Store(tmp_path / "st"), span, Recipe(build=None, test="t"), again, Settings(),
              tiers=tiers, images=ImageEvidence(tiers, span.candidates, jobs=1)).run()
    assert not any(again.prefetched)
