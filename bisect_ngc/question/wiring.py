"""From command-line options to one wired question: the range, the Recipe, the backend.

Two ways to ask:
- generic: --repo, --old, --new, --build, --test (any repository);
- release mode: --from and --to name NGC releases, images or commits; the repository is
  PyTorch, the base image is the older release's, and the recipe is the PyTorch preset
  (build a wheel in the image, test it with the repro) unless --build/--test override it.

Every command of the CLI calls `ask` once; backends come from the registry, so the same
options give the same Recipe (and keys) whichever backend runs it.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import click

from .. import backends
from . import component_mode
from ..core.artifacts import ArtifactStore
from ..core.probes import Backend, BackendSetup
from ..core.inputs import Events, Range, Settings, Tier
from ..core.belief import Prior
from ..core.belief_judge import BeliefJudge
from ..core.engine import Bisection
from ..errors import UserError
from ..vcs.mirrors import redact_url
from ..vcs.history import History
from ..metric.measured import Metric, MetricJudge
from ..images.image_evidence import ImageEvidence
from ..prebuilt.overlay import OverlayRule
from .recipe import component, make_recipe, test_file_notes
from ..core.recipes import Recipe, test_identity
from ..attribution.components import Evidence, dist_unit
from ..attribution.swap_probes import ImageSwaps
from ..images.releases import Catalog, Endpoint, containing
from ..core.search import RepeatPolicy
from .options import BY_NAME, Options
from .rules import Asked
from ..core.store import Store
from ..prebuilt.tiers import (PYTORCH_NIGHTLY, artifact_tier, image_tier, list_artifacts,
                              list_nightlies, nightly_tier)
from ..prebuilt.wheel_overlay import Overlays

TIER_WORDS = {"image": ("image", "images"), "nightly": ("nightly wheel(s)", "nightlies"),
              "prebuilt": ("prebuilt artifact(s)", "prebuilt artifacts")}


def endpoints(opts: Options, catalog: Catalog | None,
              say: Callable[[str], None] = lambda text: None) -> tuple[Endpoint, Endpoint]:
    part = component(opts)
    if catalog is None or not opts.release_mode:
        return Endpoint(opts.old or "", "commit", opts.old or ""), \
            Endpoint(opts.new or "", "commit", opts.new or "")
    if part is not None:         # the versions the images ship, read where not catalogued
        read = backends.version_reader(say)
        old, new = (component_mode.endpoint(part, catalog, spec or "", read, opts.component_tag)
                    for spec in (opts.from_, opts.to))
        return old, new
    return catalog.endpoint(opts.from_ or ""), catalog.endpoint(opts.to or "")


def labels(old: Endpoint, new: Endpoint) -> dict[str, Any]:
    out: dict[str, Any] = {"old": old.label, "new": new.label}
    for side, ep in (("old", old), ("new", new)):
        if ep.release:
            out[f"{side}_release"] = ep.release.name
            out[f"{side}_torch_version"] = ep.release.torch_version
        if ep.image:
            out[f"{side}_image"] = ep.image
    return out


def open_history(opts: Options) -> History:
    part = component(opts)
    spec = part.source if part else opts.torch_repo if opts.release_mode else (opts.repo or ".")
    return History.open(spec, opts.cache_dir)


def open_range(opts: Options, old: Endpoint, new: Endpoint,
               say: Callable[[str], None] = lambda text: None) -> Range:
    history = open_history(opts)
    old_sha, new_sha = history.resolve(old.rev), history.resolve(new.rev)
    if old_sha == new_sha and old.image and new.image:
        part = component(opts)
        what = part.name if part else "PyTorch"
        raise UserError(f"{old.label} and {new.label} ship the same {what} commit "
                        f"({old_sha[:12]}): the difference is not in {what}'s commits, so "
                        f"there is nothing to build", hint=f"ask which part of the container "
                        f"made it: bisect-ngc components --from {shlex.quote(opts.from_ or '')}"
                        f" --to {shlex.quote(opts.to or '')} --test TEST")
    candidates = history.candidates(old_sha, new_sha)
    fetched = history.prefetch(old_sha, new_sha)      # 0 unless a blobless clone lacks some
    if fetched:
        say(f"fetched the range's {fetched} missing objects at once (a blobless clone)")
    return Range(history, old_sha, new_sha, candidates, history.identity(new_sha),
                 labels(old, new))


def one_commit(opts: Options, rev: str) -> Range:
    """The range of `probe --commit`: that commit alone."""
    history = open_history(opts)
    sha = history.resolve(rev)
    return Range(history, sha, sha, [sha], history.identity(sha), {"commit": rev})


def backend_setup(opts: Options, span: Range, recipe: Recipe, store: Store,
                  say: Callable[[str], None]) -> BackendSetup:
    repo = span.repo_id[:12]
    if opts.backend_name == "slurm":
        cfg = dict(opts.slurm)
        shared = Path(cfg.pop("shared_dir", None) or opts.state / "slurm").expanduser().resolve()
        cfg.update(shared_dir=shared, worktrees=shared / "worktrees" / repo)
        return BackendSetup(recipe, span.history, store, opts.cache_dir,
                            artifact_store=_artifacts(opts, shared / "artifacts"), say=say,
                            options=cfg)
    return BackendSetup(recipe, span.history, store, opts.cache_dir,
                        artifact_store=_artifacts(opts, opts.cache_dir / "artifacts"), say=say,
                        options={"worktrees": opts.state / "worktrees" / repo,
                                 "rebuild": opts.rebuild})


def _artifacts(opts: Options, default: Path) -> Path:
    return Path(opts.artifact_store).expanduser().resolve() if opts.artifact_store else default


@dataclass
class Question:
    """A bisection's parts, wired once."""

    opts: Options
    store: Store
    catalog: Catalog | None       # release mode's; None for any other repository
    old: Endpoint
    new: Endpoint
    span: Range | None        # None only when ask(..., partial=True) could not open it
    recipe: Recipe
    backend: Backend | None
    span_error: UserError | None = None
    say: Callable[[str], None] = print
    artifact_root: Path | None = None     # the backend's artifact store
    notes: list[str] = field(default_factory=list)    # on what was chosen for the user

    def span_or_raise(self) -> Range:
        """The range; a partial question (plan's) that could not open one raises why."""
        if self.span is None:        # only a partial question (plan's) has none
            raise self.span_error or UserError("the range could not be opened")
        return self.span

    def backend_or_raise(self) -> Backend:
        """The backend; a partial question (plan's) that has none raises why."""
        if self.backend is None:
            raise self.span_error or UserError("no backend: the range could not be opened")
        return self.backend

    def _artifacts(self) -> ArtifactStore:
        if self.artifact_root is None:     # set with the backend
            raise self.span_error or UserError("no backend: the range could not be opened")
        return ArtifactStore(self.artifact_root)

    def bisection(self, settings: Settings, events: Events | None = None,
                  metric: Metric | None = None, *, listing: bool = True,
                  prior: Prior | None = None) -> Bisection:
        """The bisection this question asks for. Listing the prebuilt tiers (nightly
        indexes, artifact directories, downloads of their metadata) is its only I/O;
        without `listing` (--dry-run) only the catalog's images are used, and it says so.
        `prior`: the belief's, where an earlier search of the same test informs it."""
        if metric is not None:    # builds only: an image's or a nightly's speed is not a commit's
            span = self.span_or_raise()
            return Bisection(self.store, span, self.recipe, self.backend_or_raise(), settings,
                             events=events, ships=self.ships, overlays=self.overlays(),
                             judge=MetricJudge(metric, span.candidates, settings))
        tiers, overlays, span = self.tiers(listing), self.overlays(), self.span_or_raise()
        if not (self.opts.release_mode or tiers or overlays) and len(span.candidates) > 1:
            return Bisection(self.store, span, self.recipe, self.backend_or_raise(), settings,
                             events=events, ships=self.ships,
                             judge=BeliefJudge(span.candidates, settings, prior))
        follows = self.follows_narrowing() and any(t.name == "image" for t in tiers)
        images = ImageEvidence(tiers, span.candidates, settings.jobs,
                               swaps=self.swaps(tiers, settings),
                               rebase=self.rebased if follows else None) \
            if self.opts.release_mode else None
        return Bisection(self.store, span, self.recipe, self.backend_or_raise(), settings,
                         events=events, ships=self.ships, tiers=tiers, overlays=overlays,
                         images=images)

    def follows_narrowing(self) -> bool:
        o = self.opts
        return o.release_mode and not (o.base_image or o.image)

    def image_points(self) -> dict[int, str]:
        """The release images on the path, by candidate index (catalog only, no I/O)."""
        o = self.opts
        if not o.release_mode or o.no_images or "image" not in self.backend_or_raise().tiers:
            return {}
        tier = self._tier("image")[0]
        return {i: s.label for i, s in tier.sources.items()}

    def rebased(self, image: str) -> tuple[Recipe, Backend, Overlays | None]:
        """The recipe, backend and overlays for builds in `image`: the older of the two
        releases that the images narrowed the range to."""
        opts = replace(self.opts, base_image=image)
        recipe, _ = make_recipe(opts, self.old)
        setup = backend_setup(opts, self.span_or_raise(), recipe, self.store, self.say)
        again = replace(self, opts=opts, recipe=recipe,
                        backend=backends.create(opts.backend_name, setup))
        return recipe, again.backend_or_raise(), again.overlays()

    def swaps(self, tiers: list[Tier], settings: Settings) -> ImageSwaps | None:
        """Swap probes between release images (Docker): whether PyTorch carries their
        difference, before any build, and which component does when it does not."""
        # A swap runs the images without --with companions: not the probes' environment.
        engine = self.backend_or_raise().containers() if any(t.name == "image" for t in tiers) and \
            not self.recipe.companions else None
        if engine is None:
            return None
        r = self.recipe
        work = engine.work_dir or self.opts.cache_dir / "components"
        part = component(self.opts)
        test = r.test_as_is or r.test
        return ImageSwaps(engine, work, test, self.say,
                          unit=dist_unit(part.name if part else "torch"),
                          evidence=Evidence(settings.repeat, settings.policy, settings.verify),
                          test_identity=test_identity(test), symptom=self.opts.symptom)

    def overlays(self) -> Overlays | None:
        """Overlay probes, where the recipe says which files ship and the backend can test
        a ready wheel."""
        r = self.recipe
        if self.opts.no_overlay or not r.overlay:
            return None
        if "overlay" not in self.backend_or_raise().tiers:
            self.say(f"the {self.backend_or_raise().name} backend cannot probe overlays (its builds are "
                     "not in the artifact store): every probe builds")
            return None
        return Overlays(self.span_or_raise().history, self._artifacts(),
                        self.span_or_raise().candidates, r.image or "", r.build_key(),
                        OverlayRule.parse(r.overlay), self.say)

    def tiers(self, listing: bool = True) -> list[Tier]:
        """The prebuilt tiers asked for, cheapest first, that this backend can probe."""
        o = self.opts
        if component(o) is not None:       # nightlies carry torch commits
            asked = {"image": not o.no_images}
        elif o.release_mode:
            # The default index only serves the repro preset, whose test installs the wheel.
            nightlies = bool(o.nightly_index or o.nightly_urls or not o.test)
            asked = {"image": not o.no_images, "nightly": nightlies and not o.no_nightlies}
        else:
            asked = {"prebuilt": bool(o.artifacts)}
        wanted = [kind for kind, on in asked.items() if on]
        missing = [kind for kind in wanted if kind not in self.backend_or_raise().tiers]
        if missing:
            self.say(f"the {self.backend_or_raise().name} backend cannot probe prebuilt "
                     f"{' or '.join(TIER_WORDS[k][1] for k in missing)}: those probes build")
        usable = [kind for kind in wanted if kind not in missing]
        unlisted = [kind for kind in usable if kind != "image" and not listing]
        if unlisted:
            self.say(f"dry run: {' and '.join(TIER_WORDS[k][1] for k in unlisted)} are not "
                     "listed (that reads their index); the rounds shown may differ")
        return [tier for kind in usable if kind not in unlisted for tier in self._tier(kind)]

    def _tier(self, kind: str) -> list[Tier]:
        if kind == "image":       # the catalog's releases, by the commit of what is bisected
            part = component(self.opts)
            commit_of = (lambda rel: rel.torch_commit) if part is None else \
                (lambda rel: rel.te_commit) if part.name == "transformer_engine" else \
                (lambda rel: "")
            assert self.catalog is not None, "images are release mode's"
            return [image_tier(self.span_or_raise(), self.catalog, self.old, self.new, commit_of)]
        o, rel = self.opts, self.old.release
        each, plural = TIER_WORDS[kind]
        store = self._artifacts()
        try:
            if kind == "nightly":
                index = o.nightly_index or (PYTORCH_NIGHTLY.format(
                    cuda="cu" + "".join(rel.cuda.split(".")[:2])) if rel and rel.cuda else None)
                found = list_nightlies(index, o.nightly_urls, rel.python if rel else None)
                tier = nightly_tier(self.span_or_raise(), found, store, self.say)
            else:
                tier = artifact_tier(self.span_or_raise(), list_artifacts(o.artifacts or ""), o.artifact_map,
                                     store, self.say)
        except UserError as exc:
            self.say(f"{exc.message}; going on without {plural}")
            return []
        self.say(f"{len(tier.sources)} {each} map onto the range" if tier.sources
                 else f"no {plural} map onto the range; going on without them")
        return [tier] if tier.sources else []

    def ships(self, sha: str) -> list[dict[str, str]]:
        """Catalog releases that do and do not contain sha (for the report)."""
        if self.catalog is None:         # another repository: no release ships its commits
            return []
        rows = containing(self.span_or_raise().history, sha, self.catalog)
        return [dict(r, commit=r["commit"][:12]) for r in rows if r["contains"] != "unknown"]


def ask(opts: Options, say: Callable[[str], None], *, store: Store | None = None,
        commit: str | None = None, partial: bool = False) -> Question:
    """Checked Options (options_from) -> endpoints -> range -> recipe -> backend. With
    commit: that commit alone (for `probe`). With partial, a range that cannot be opened (no clone, say) leaves
    span and backend None and the error in span_error, for `plan`."""
    store = store or Store(opts.state)
    catalog = Catalog.load(opts.cache_dir) if opts.release_mode else None
    old, new = endpoints(opts, catalog, say)
    recipe, notes = make_recipe(opts, old)
    try:
        span = one_commit(opts, commit) if commit else open_range(opts, old, new, say)
    except UserError as exc:
        if not partial:
            raise
        return Question(opts, store, catalog, old, new, None, recipe, None, exc, say,
                        notes=notes)
    for note in test_file_notes(recipe.test_as_is, span.history) + dirty_notes(span.history):
        say(note)
    setup = backend_setup(opts, span, recipe, store, say)
    backend = backends.create(opts.backend_name, setup)
    return Question(opts, store, catalog, old, new, span, recipe, backend, None, say,
                    setup.artifact_store, notes)


def dirty_notes(history: History) -> list[str]:
    """A checkout with uncommitted changes: they are not what is tested."""
    repo = history.repo
    if history.owned or repo.bare or not repo.is_dirty(untracked_files=False):
        return []
    return [f"note: {repo.working_tree_dir} has uncommitted changes; they are not tested: "
            "each commit is tested as committed, in a worktree of its own (commit them, "
            "and name that commit, to test them)"]


def jobs_notes(backend_name: str, jobs: int) -> list[str]:
    """More probes at once than this host has CPUs, where they all run on this host."""
    cpus = os.cpu_count() or 1
    if backend_name == "slurm" or jobs <= cpus:
        return []
    return [f"warning: --jobs {jobs} on a host with {cpus} CPUs: {jobs} builds and tests run "
            f"here at once, each in a worktree of its own (`bisect-ngc gc` removes them "
            f"afterwards); --jobs {cpus} or fewer is usually faster"]


def command_line(ctx: click.Context, command: str = "probe", drop: tuple[str, ...] = (),
                 redact: bool = True) -> list[str]:
    """This question as another subcommand's command line: by default the
    `bisect-ngc probe` that re-runs one probe (add --commit), without credentials."""
    argv = ["bisect-ngc", command]
    for param in ctx.command.params:
        opt = BY_NAME.get(param.name or "")
        if opt is None or not opt.replay or opt.name in drop:
            continue
        value = ctx.params.get(param.name)
        if value is None or value == param.default or value is False or value == ():
            continue
        flag = param.opts[0]
        if param.name in ("state", "cache_dir"):
            value = str(Path(value).expanduser().resolve())
        if redact and param.name in ("repo", "torch_repo"):
            value = redact_url(str(value))
        if isinstance(value, tuple):
            argv += [f"{flag}={item}" for item in value]
            continue
        argv += [flag] if value is True else [flag, str(value)]
    return argv


def run_settings(asked: Asked, ctx: click.Context) -> Settings:
    """How the engine runs this command line's bisection."""
    run, bis = asked.run, asked.bisect
    if "repeat_policy" in asked.given and not asked.question.release_mode and \
            asked.question.metric is None:
        raise UserError("--repeat-policy no longer applies to a bisection of commits: every "
                        "run enters its belief, and --confidence says how sure the answer "
                        "must be; drop --repeat-policy (--repeat N still runs each probe N "
                        "times)")
    return Settings(jobs=bis.jobs, repeat=run.repeat, policy=RepeatPolicy(run.repeat_policy),
                    retry_skips=asked.question.retry_skips, probe_argv=command_line(ctx),
                    verify=run.verify, max_skips=bis.max_skips or None,
                    confidence=run.confidence,
                    premises=run.verify if "verify" in asked.given else 1)
