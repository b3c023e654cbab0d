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

from . import backends
from .artifacts import ArtifactStore
from .backends.base import Backend, BackendSetup
from .engine import Bisection, Events, Range, Settings, Tier
from .errors import UserError
from .git_mirrors import redact_url
from .history import History
from .measured import MeasuredBisection, Metric
from .metric_options import METRIC_KEYS
from .overlay import OverlayRule, RuleError
from .recipes import Recipe, local_cuda_arch, pytorch_preset
from .components import ImageSwaps
from .releases import UPSTREAM, Catalog, Endpoint, containing
from .search import RepeatPolicy
from .store import Store
from .tiers import (MAP_RULES, PYTORCH_NIGHTLY, artifact_tier, image_tier, list_artifacts,
                    list_nightlies, nightly_tier)
from .wheel_overlay import Overlays

EXIT_CODES_HELP = """\b
Exit codes:
  0    found the first commit with the new behaviour
  2    bad input (unknown release or revision, no Docker engine, state in use, ...)
  3    invalid endpoints (both behave the same, or one cannot be tested; with --metric:
       their numbers do not differ by --min-change at --p-threshold)
  4    ambiguous (untestable commits hide the transition; candidates listed)
  5    not in these commits: the images differ, but builds of their commits in one
       base image do not (another part of the container made the difference)
  130  interrupted; the state is kept and the same command resumes
"""

VERDICT_HELP = """\b
The test command follows `git bisect run`:
  exit 0 = pass, 125 = cannot test (skip), 1-127 = fail,
  killed by a signal or by --timeout = skip.
A failed build is a skip too. Both commands run in the commit's worktree with
BISECT_COMMIT, BISECT_WORKTREE and BISECT_ARTIFACTS set (in the container too,
with --backend docker, where the test also sees the build's artifacts read-only).
Passes, failures, exit-125 skips and failed builds are cached; other skips
(timeouts, signals, infrastructure errors) are probed again next time.
"""

RELEASE_HELP = """\b
Release mode: --from and --to take an NGC release (24.09), an image
(nvcr.io/nvidia/pytorch:24.09-py3) or a commit. The repository is PyTorch
(--torch-repo), the base image is the older release's (--base-image), and each
probe builds a wheel in that image and runs `python -m repro` on it in a fresh
container with the GPUs.
"""

DEFAULT_CUDA_ARCH = "9.0"
TIER_WORDS = {"image": ("image", "images"), "nightly": ("nightly wheel(s)", "nightlies"),
              "prebuilt": ("prebuilt artifact(s)", "prebuilt artifacts")}
DEFAULT_BUILD_TIMEOUT = 6 * 3600.0


@dataclass
class Options:
    cache_dir: Path
    state: Path
    repo: str | None = None
    old: str | None = None
    new: str | None = None
    from_: str | None = None
    to: str | None = None
    torch_repo: str = UPSTREAM
    build: str | None = None
    test: str | None = None
    timeout: float | None = None
    build_timeout: float | None = DEFAULT_BUILD_TIMEOUT
    no_clean: bool = False
    keep: tuple[str, ...] = ("build",)
    no_submodules: bool = False
    backend: str | None = None
    image: str | None = None
    build_image: str | None = None
    base_image: str | None = None
    cuda_arch: str | None = None
    max_jobs: int | None = None
    repro_args: str = ""
    gpus: str = "auto"
    build_tree: bool | None = None
    retry_skips: bool = False
    check_torch_commit: bool | None = None
    artifact_store: Path | None = None
    no_images: bool = False
    no_nightlies: bool = False
    nightly_index: str | None = None
    nightly_urls: Path | None = None
    artifacts: str | None = None
    artifact_map: str = "name"
    overlay_rule: tuple[str, ...] = ()
    no_overlay: bool = False
    slurm: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def release_mode(self) -> bool:
        return bool(self.from_ or self.to)

    @property
    def backend_name(self) -> str:
        return self.backend or ("docker" if self.release_mode else "local")

    def check(self) -> None:
        if self.release_mode:
            if not (self.from_ and self.to):
                raise UserError("--from and --to go together",
                                hint="e.g. --from 24.09 --to 24.10")
            if self.old or self.new:
                raise UserError("use either --from/--to (releases) or --old/--new (revisions)",
                                hint="--from 24.09 --to 24.10, or --repo R --old A --new B")
        else:
            if not (self.old and self.new):
                raise UserError("say what to bisect: --old and --new, or --from and --to",
                                hint="e.g. --repo . --old v1.0 --new main, or --from 24.09 "
                                     "--to 24.10")
            if not self.test:
                raise UserError("--test is required outside release mode",
                                hint="a shell command whose exit code is the verdict "
                                     "(0 pass, 1-127 fail, 125 skip)")
        if self.backend_name == "docker" and not self.release_mode and not self.image:
            raise UserError("--backend docker needs --image for a generic recipe",
                            hint="name an image that has what --build and --test need")
        if self.backend_name == "local" and self.release_mode and not (self.build and self.test):
            raise UserError("--backend local in release mode needs --build and --test",
                            hint="or use --backend docker for the PyTorch recipe")
        if self.artifact_map not in MAP_RULES[:-1] and not (
                self.artifact_map.startswith("command:") and self.artifact_map[8:].strip()):
            raise UserError(f"unknown --artifact-map rule {self.artifact_map!r}",
                            hint=f"one of {', '.join(MAP_RULES)}")
        for path in self.keep:
            if not path or path.startswith("/") or ".." in Path(path).parts:
                raise UserError(f"--keep {path!r} must be a path inside the worktree",
                                hint="e.g. --keep build")
        rendered = {"--image": self.image, "--base-image": self.base_image,
                    "--build-image": self.build_image,
                    "--cuda-arch": self.cuda_arch, "--repro-args": self.repro_args,
                    **{f"--{k.replace('_', '-')}": v for k, v in self.slurm.items()
                       if k != "shared_dir"}}
        for flag, value in rendered.items():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and ("\n" in item or "\r" in item):
                    raise UserError(f"{flag} must be one line",
                                    hint="values are written into scripts; remove the newline")


def endpoints(opts: Options, catalog: Catalog) -> tuple[Endpoint, Endpoint]:
    if opts.release_mode:
        return catalog.endpoint(opts.from_), catalog.endpoint(opts.to)
    return Endpoint(opts.old, "commit", opts.old), Endpoint(opts.new, "commit", opts.new)


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
    return History.open(opts.torch_repo if opts.release_mode else (opts.repo or "."),
                        opts.cache_dir)


def open_range(opts: Options, old: Endpoint, new: Endpoint,
               say: Callable[[str], None] = lambda text: None) -> Range:
    history = open_history(opts)
    old_sha, new_sha = history.resolve(old.rev), history.resolve(new.rev)
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


def make_recipe(opts: Options, old: Endpoint) -> Recipe:
    """The one Recipe for these options, whichever backend runs it."""
    timeouts = {"timeout": opts.timeout, "build_timeout": opts.build_timeout}
    if not opts.release_mode:
        return Recipe(build=opts.build, test=opts.test, test_as_is=opts.test, image=opts.image,
                      build_image=opts.build_image, gpus=opts.gpus,
                      build_tree=bool(opts.build_tree), clean=not opts.no_clean,
                      keep=list(opts.keep), submodules=not opts.no_submodules,
                      expect_torch_commit=bool(opts.check_torch_commit),
                      overlay=_overlay_rule(opts.overlay_rule), **timeouts)
    image = opts.base_image or opts.image or old.image
    if not image:
        raise UserError("no base image: --from is a commit, not a release",
                        hint="pass --base-image nvcr.io/nvidia/pytorch:YY.MM-py3")
    arch = opts.cuda_arch or local_cuda_arch()
    if arch is None:
        arch = DEFAULT_CUDA_ARCH
        opts.notes.append(f"no local GPU found: building for compute capability {arch} "
                          "(pass --cuda-arch to change it)")
    recipe = pytorch_preset(image, cuda_arch=arch, max_jobs=opts.max_jobs,
                            repro_args=shlex.split(opts.repro_args),
                            gpus="all" if opts.gpus == "auto" else opts.gpus,
                            build_tree=opts.build_tree is not False)
    recipe.timeout, recipe.build_timeout, recipe.clean = opts.timeout, opts.build_timeout, \
        not opts.no_clean
    recipe.keep, recipe.submodules = list(opts.keep), not opts.no_submodules
    if opts.build:
        recipe.build, recipe.build_image, recipe.build_dockerfile = opts.build, None, None
    if opts.build_image:
        recipe.build_image, recipe.build_dockerfile = opts.build_image, None
    if opts.test:
        recipe.test, recipe.test_as_is, recipe.expect_torch_commit = opts.test, opts.test, False
        recipe.subject = "The failure"
    if opts.check_torch_commit is not None:
        recipe.expect_torch_commit = opts.check_torch_commit
    if opts.overlay_rule:
        recipe.overlay = _overlay_rule(opts.overlay_rule)
    return recipe


def _overlay_rule(lines: tuple[str, ...]) -> list[str]:
    try:
        OverlayRule.parse(lines) if lines else None
    except RuleError as exc:
        raise UserError(str(exc), hint="e.g. --overlay-rule 'ships:mypkg/*.py' "
                                       "--overlay-rule 'inert:tests/*'") from None
    return list(lines)


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
                        options={"worktrees": opts.state / "worktrees" / repo})


def _artifacts(opts: Options, default: Path) -> Path:
    return Path(opts.artifact_store).expanduser().resolve() if opts.artifact_store else default


@dataclass
class Question:
    """A bisection's parts, wired once."""

    opts: Options
    store: Store
    catalog: Catalog
    old: Endpoint
    new: Endpoint
    span: Range | None        # None only when ask(..., partial=True) could not open it
    recipe: Recipe
    backend: Backend | None
    span_error: UserError | None = None
    say: Callable[[str], None] = print
    artifact_root: Path | None = None     # the backend's artifact store

    def bisection(self, settings: Settings, events: Events | None = None,
                  metric: Metric | None = None) -> Bisection:
        if metric is not None:    # builds only: an image's or a nightly's speed is not a commit's
            return MeasuredBisection(self.store, self.span, self.recipe, self.backend, settings,
                                     events=events, ships=self.ships, overlays=self.overlays(),
                                     metric=metric)
        tiers = self.tiers()
        follows = self.follows_narrowing() and any(t.name == "image" for t in tiers)
        return Bisection(self.store, self.span, self.recipe, self.backend, settings,
                         events=events, ships=self.ships, tiers=tiers,
                         overlays=self.overlays(), swaps=self.swaps(tiers),
                         rebase=self.rebased if follows else None)

    def follows_narrowing(self) -> bool:
        o = self.opts
        return o.release_mode and not (o.base_image or o.image)

    def image_points(self) -> dict[int, str]:
        """The release images on the path, by candidate index (catalog only, no I/O)."""
        o = self.opts
        if not o.release_mode or o.no_images or "image" not in self.backend.tiers:
            return {}
        tier = image_tier(self.span, self.catalog, self.old, self.new)
        return {i: s.label for i, s in tier.sources.items()}

    def rebased(self, image: str) -> tuple[Recipe, Backend, Overlays | None]:
        """The recipe, backend and overlays for builds in `image`: the older of the two
        releases that the images narrowed the range to."""
        opts = replace(self.opts, base_image=image, notes=[])
        recipe = make_recipe(opts, self.old)
        setup = backend_setup(opts, self.span, recipe, self.store, self.say)
        again = replace(self, opts=opts, recipe=recipe,
                        backend=backends.create(opts.backend_name, setup))
        return recipe, again.backend, again.overlays()

    def swaps(self, tiers: list[Tier]) -> ImageSwaps | None:
        """Swap probes between release images (Docker): whether PyTorch carries their
        difference, before any build, and which component does when it does not."""
        engine = getattr(self.backend, "containers", None)    # backends that run images
        if engine is None or not any(t.name == "image" for t in tiers):
            return None
        r = self.recipe
        return ImageSwaps(engine(), self.opts.cache_dir / "components", r.test_as_is or r.test,
                          self.say)

    def overlays(self) -> Overlays | None:
        """Overlay probes, where the recipe says which files ship and the backend can test
        a ready wheel."""
        r = self.recipe
        if self.opts.no_overlay or not r.overlay:
            return None
        if "overlay" not in self.backend.tiers:
            self.say(f"the {self.backend.name} backend cannot probe overlays (its builds are "
                     "not in the artifact store): every probe builds")
            return None
        return Overlays(self.span.history, ArtifactStore(self.artifact_root),
                        self.span.candidates, r.image or "", r.build_key(),
                        OverlayRule.parse(r.overlay), self.say)

    def tiers(self) -> list[Tier]:
        """The prebuilt tiers asked for, cheapest first, that this backend can probe."""
        o = self.opts
        if o.release_mode:
            # The default index only serves the repro preset, whose test installs the wheel.
            nightlies = bool(o.nightly_index or o.nightly_urls or not o.test)
            asked = {"image": not o.no_images, "nightly": nightlies and not o.no_nightlies}
        else:
            asked = {"prebuilt": bool(o.artifacts)}
        wanted = [kind for kind, on in asked.items() if on]
        missing = [kind for kind in wanted if kind not in self.backend.tiers]
        if missing:
            self.say(f"the {self.backend.name} backend cannot probe prebuilt "
                     f"{' or '.join(TIER_WORDS[k][1] for k in missing)}: those probes build")
        return [tier for kind in wanted if kind not in missing for tier in self._tier(kind)]

    def _tier(self, kind: str) -> list[Tier]:
        if kind == "image":
            return [image_tier(self.span, self.catalog, self.old, self.new)]
        o, rel = self.opts, self.old.release
        each, plural = TIER_WORDS[kind]
        store = ArtifactStore(self.artifact_root)
        try:
            if kind == "nightly":
                index = o.nightly_index or (PYTORCH_NIGHTLY.format(
                    cuda="cu" + "".join(rel.cuda.split(".")[:2])) if rel and rel.cuda else None)
                found = list_nightlies(index, o.nightly_urls, rel.python if rel else None)
                tier = nightly_tier(self.span, found, store, self.say)
            else:
                tier = artifact_tier(self.span, list_artifacts(o.artifacts), o.artifact_map,
                                     store, self.say)
        except UserError as exc:
            self.say(f"{exc.message}; going on without {plural}")
            return []
        self.say(f"{len(tier.sources)} {each} map onto the range" if tier.sources
                 else f"no {plural} map onto the range; going on without them")
        return [tier] if tier.sources else []

    def ships(self, sha: str) -> list[dict[str, str]]:
        """Catalog releases that do and do not contain sha (for the report)."""
        rows = containing(self.span.history, sha, self.catalog)
        return [dict(r, commit=r["commit"][:12]) for r in rows if r["contains"] != "unknown"]


def ask(opts: Options, say: Callable[[str], None], *, store: Store | None = None,
        commit: str | None = None, partial: bool = False) -> Question:
    """Options -> endpoints -> range -> recipe -> backend. With commit: that commit alone
    (for `probe`). With partial, a range that cannot be opened (no clone, say) leaves
    span and backend None and the error in span_error, for `plan`."""
    opts.check()
    store = store or Store(opts.state)
    catalog = Catalog.load(opts.cache_dir)
    old, new = endpoints(opts, catalog)
    recipe = make_recipe(opts, old)
    try:
        span = one_commit(opts, commit) if commit else open_range(opts, old, new, say)
    except UserError as exc:
        if not partial:
            raise
        return Question(opts, store, catalog, old, new, None, recipe, None, exc, say)
    setup = backend_setup(opts, span, recipe, store, say)
    backend = backends.create(opts.backend_name, setup)
    return Question(opts, store, catalog, old, new, span, recipe, backend, None, say,
                    setup.artifact_store)


# --- the options on the command line, and their meaning ---------------------------

def default_state(state: Path | None = None) -> Path:
    if state is None and os.environ.get("BISECT_NGC_STATE"):
        state = Path(os.environ["BISECT_NGC_STATE"])
    if state is None:
        state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") \
            / "bisect-ngc"
    return state.expanduser().resolve()


def default_cache(cache: Path | None = None) -> Path:
    if cache is None:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        cache = Path(os.environ.get("BISECT_NGC_CACHE") or base / "bisect-ngc")
    return cache.expanduser().resolve()


def _stack(*options):
    def apply(f):
        for opt in reversed(options):
            f = opt(f)
        return f
    return apply


state_option = click.option(
    "--state", type=click.Path(path_type=Path), default=None,
    help="State directory (sessions, probes, logs, result cache). "
         "Default: $BISECT_NGC_STATE or ~/.local/state/bisect-ngc.")
cache_option = click.option(
    "--cache-dir", type=click.Path(path_type=Path), default=None,
    help="Clones, build artifacts, ccache and the release overlay. "
         "Default: $BISECT_NGC_CACHE or ~/.cache/bisect-ngc.")

question_options = _stack(
    click.option("--repo", default=None,
                 help="Local path or clone URL of the repository (generic mode; default .)."),
    click.option("--old", default=None, help="Revision with the old behaviour."),
    click.option("--new", default=None,
                 help="Revision with the new behaviour; the search finds the first commit "
                      "that behaves like it, a fix or a regression alike."),
    click.option("--from", "from_", default=None,
                 help="Release mode: the older NGC release, image or commit."),
    click.option("--to", default=None, help="Release mode: the newer release, image or commit."),
    click.option("--torch-repo", default=UPSTREAM, show_default=True,
                 help="PyTorch sources in release mode: a path, or a URL cloned once "
                      "(blobless) into the cache dir."),
    click.option("--build", default=None, help="Shell command that builds the commit."),
    click.option("--test", default=None,
                 help="Shell command whose exit code is the verdict (release mode: the "
                      "repro by default)."),
    click.option("--timeout", type=click.FloatRange(0, min_open=True), default=None,
                 help="Seconds one test run may take; past it the run is a skip."),
    click.option("--build-timeout", type=click.FloatRange(0, min_open=True),
                 default=DEFAULT_BUILD_TIMEOUT, show_default=True,
                 help="Seconds one build may take; past it the commit is a skip (not cached)."),
    click.option("--check-torch-commit/--no-check-torch-commit", default=None,
                 help="Require the test's last JSON line to report torch_git_version equal "
                      "to the probed commit, else the probe is a skip (default: on for the "
                      "release-mode repro, off for your own --test)."),
    click.option("--artifacts", default=None, metavar="SPEC",
                 help="Prebuilt artifacts to bisect before building (any repository): a "
                      "directory, a file of URLs, or an index page URL. A probe downloads "
                      "one into the artifact store and runs the test with "
                      "$BISECT_ARTIFACTS pointing at it, with no build."),
    click.option("--artifact-map", default="name", show_default=True, metavar="RULE",
                 help="How an artifact names its commit: " + ", ".join(MAP_RULES) +
                      " (CMD gets the file as $1 and prints the sha)."),
    click.option("--overlay-rule", multiple=True, metavar="KIND:GLOB",
                 help="Which changed files a neighbour's wheel can take as they are, so a "
                      "commit whose diff to a built neighbour touches nothing else is tested "
                      "on that wheel with its files put in (an overlay: about a minute, not "
                      "a build). KIND is ships (installed byte for byte), never (looks like "
                      "it ships but the build reads or writes it) or inert (never reaches the "
                      "build: tests, docs); `*` also matches `/`. Repeatable; `pytorch` is "
                      "the preset that release mode uses. Example: --overlay-rule "
                      "'ships:mypkg/*.py' --overlay-rule 'never:mypkg/_version.py'."),
    click.option("--no-overlay", is_flag=True,
                 help="Build every probed commit; never test a neighbour's wheel with this "
                      "commit's Python files put in."),
    click.option("--no-images", is_flag=True,
                 help="Release mode: do not test the NGC images as they are before building "
                      "(the endpoints' images first, then the releases in between)."),
    click.option("--nightly-index", default=None, metavar="URL",
                 help="Release mode: a PEP 503 project page of nightly wheels to bisect "
                      "before building. Default: PyTorch's nightly index for the base "
                      "image's CUDA (e.g. https://download.pytorch.org/whl/nightly/cu126/"
                      "torch/)."),
    click.option("--nightly-urls", type=click.Path(path_type=Path, dir_okay=False),
                 default=None, metavar="FILE",
                 help="Release mode: nightly wheel URLs, one a line (old nightlies leave the "
                      "index but stay downloadable)."),
    click.option("--no-nightlies", is_flag=True,
                 help="Release mode: do not use nightly wheels."),
    click.option("--retry-skips", is_flag=True,
                 help="Probe again the commits whose cached verdict is a skip (e.g. after "
                      "fixing the build); passes and failures stay cached."),
    click.option("--no-clean", is_flag=True,
                 help="Local backend: keep every untracked file between probes; the default "
                      "is `git clean -ffdx` except the --keep paths."),
    click.option("--keep", multiple=True, default=("build",), show_default=True,
                 metavar="PATH",
                 help="A path of the worktree that survives the clean between probes, for "
                      "incremental builds (repeatable; PyTorch builds into build/)."),
    click.option("--no-submodules", is_flag=True,
                 help="Do not update submodules at each checkout (for tests that need none, "
                      "or when their remotes are unreachable)."),
    click.option("--backend", type=click.Choice(["local", "docker", "slurm"]), default=None,
                 help="Where builds and tests run. Default: docker in release mode, else local."),
    click.option("--image", default=None,
                 help="Docker backend, generic recipe: the image both commands run in."),
    click.option("--build-image", default=None,
                 help="Docker backend: build in this image instead (tests still run in "
                      "--image or the base image), e.g. one with compilers."),
    click.option("--base-image", default=None,
                 help="Release mode: build and test in this image instead of the older "
                      "release's."),
    click.option("--cuda-arch", default=None,
                 help="TORCH_CUDA_ARCH_LIST for PyTorch builds. Default: this host's GPU's "
                      "compute capability."),
    click.option("--max-jobs", type=click.IntRange(1, 1024), default=None,
                 help="MAX_JOBS for PyTorch builds. Default: the number of CPUs."),
    click.option("--repro-args", default="",
                 help="Extra flags for `python -m repro` in release mode, e.g. "
                      "'--num-layers 2 --seq-length 4096'."),
    click.option("--gpus", type=click.Choice(["auto", "all", "none"]), default="auto",
                 show_default=True,
                 help="GPUs for test containers: all, none, or auto (all when the engine has "
                      "the nvidia runtime; release mode: all)."),
    click.option("--build-tree/--no-build-tree", default=None,
                 help="Docker backend: mount a persistent build/ directory per worker slot "
                      "into the worktree, so neighbouring commits rebuild incrementally "
                      "(default: on in release mode, off for a generic recipe)."),
    click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
                 help="Test runs per commit, for flaky repros."),
    click.option("--repeat-policy", type=click.Choice([p.value for p in RepeatPolicy]),
                 default="any", show_default=True,
                 help="any: one failing run makes the commit fail (intermittent failures). "
                      "majority: the commoner of pass/fail wins; a tie is a skip."),
    cache_option,
    state_option,
    click.option("--artifact-store", type=click.Path(path_type=Path), default=None,
                 help="The content-addressed build store, shared by sessions and backends: a "
                      "build is reused wherever commit, image and build recipe match. "
                      "Default: CACHE/artifacts (Slurm: SHARED/artifacts)."),
    click.option("--partition", default=None, help="Slurm: partition for builds (CPU)."),
    click.option("--gpu-partition", default=None,
                 help="Slurm: partition for tests (GPU). Default: --partition."),
    click.option("--account", default=None, help="Slurm: --account for every job."),
    click.option("--qos", default=None, help="Slurm: --qos for every job."),
    click.option("--time", "time_limit", default=None, metavar="LIMIT",
                 help="Slurm: --time for probe jobs, e.g. 4:00:00."),
    click.option("--gpus-per-probe", type=click.IntRange(0, 64), default=1, show_default=True,
                 help="Slurm: GPUs for each test task."),
    click.option("--sbatch-arg", "sbatch_args", multiple=True, metavar="ARG",
                 help="Slurm: extra #SBATCH line for probe jobs (repeatable), e.g. "
                      "--sbatch-arg=--constraint=h100."),
    click.option("--container-runtime", type=click.Choice(["none", "pyxis", "enroot",
                                                            "apptainer"]),
                 default="none", show_default=True,
                 help="Slurm: how probe jobs enter the image (none: bare metal, e.g. modules). "
                      "enroot and pyxis import the image once per digest into a squashfs in "
                      "the shared directory (SHARED/enroot/) and start every task from it."),
    click.option("--container-import", type=click.Choice(["registry", "dockerd"]),
                 default="registry", show_default=True,
                 help="Slurm with enroot or pyxis: import the image from its registry "
                      "(docker://, credentials in ~/.config/enroot/.credentials) or from the "
                      "local Docker engine (dockerd://; the image must be pulled there)."),
    click.option("--shared-dir", type=click.Path(path_type=Path), default=None,
                 help="Slurm: a directory every node sees (worktrees, wheels, verdicts). "
                      "Default: STATE/slurm."),
    click.option("--same-node", is_flag=True,
                 help="Slurm: run every test job on the node of the session's first test run "
                      "(--nodelist), so measurements that are compared share one machine "
                      "(with --metric)."),
    click.option("--max-retries", type=click.IntRange(0, 20), default=2, show_default=True,
                 help="Slurm: resubmissions of a probe that was preempted, cancelled or "
                      "lost with its node, before it counts as a skip."),
)

SLURM_KEYS = {"partition": "partition", "gpu_partition": "gpu_partition", "account": "account",
              "qos": "qos", "time_limit": "time", "gpus_per_probe": "gpus_per_probe",
              "sbatch_args": "sbatch_args", "container_runtime": "runtime",
              "container_import": "container_import",
              "shared_dir": "shared_dir", "max_retries": "max_retries",
              "same_node": "same_node"}

QUESTION_KEYS = ("repo", "old", "new", "from_", "to", "torch_repo", "build", "test", "timeout",
                 "build_timeout", "no_clean", "keep", "no_submodules", "backend", "image",
                 "build_image", "base_image", "cuda_arch", "max_jobs", "repro_args", "gpus",
                 "build_tree", "retry_skips", "check_torch_commit", "artifact_store",
                 "no_images", "no_nightlies", "nightly_index", "nightly_urls", "artifacts",
                 "artifact_map", "overlay_rule", "no_overlay")


def options_from(params: dict[str, Any]) -> Options:
    """The Options of a command's click parameters (the question_options above)."""
    slurm = {SLURM_KEYS[k]: params[k] for k in SLURM_KEYS}
    slurm["sbatch_args"] = list(slurm["sbatch_args"])
    opts = Options(cache_dir=default_cache(params["cache_dir"]),
                   state=default_state(params["state"]), slurm=slurm,
                   **{k: params[k] for k in QUESTION_KEYS})
    opts.check()
    return opts


def command_line(ctx: click.Context, command: str = "probe", drop: tuple[str, ...] = (),
                 redact: bool = True) -> list[str]:
    """This question as another subcommand's command line: by default the
    `bisect-ngc probe` that re-runs one probe (add --commit), without credentials."""
    argv = ["bisect-ngc", command]
    skip = {"jobs", "as_json", "quiet", "dry_run", "controller_partition", "controller_time",
            "retry_skips", *METRIC_KEYS, *drop}
    for param in ctx.command.params:
        if param.name in skip or not isinstance(param, click.Option):
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


def run_settings(ctx: click.Context, jobs: int, repeat: int, repeat_policy: str,
                 retry_skips: bool) -> Settings:
    return Settings(jobs=jobs, repeat=repeat, policy=RepeatPolicy(repeat_policy),
                    retry_skips=retry_skips, probe_argv=command_line(ctx))
