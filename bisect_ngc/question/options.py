"""Every command-line option, declared once: its flags, click type, default, help, group
and box in --help (flags.py says how a declaration reads).

The options are typed fields: the question's of `Options`, the others of `RunOptions`,
`BisectOptions` and `MetricOptions`, each carrying its flag; with the Slurm settings and a
few commands' own options they make the table, from which come the click decorators
(`options`), the help boxes, the Slurm settings, and `command_line`, which writes a
question back as another subcommand's arguments (`wiring.command_line`). `rules` makes the
checked values (`asked_options` hands a command one typed `Asked`). Slurm options take
their defaults from `SlurmSettings`, which the backend registry names.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import click

from ..attribution.suspects import SYMPTOMS
from ..backends import settings_type
from ..core.inputs import DEFAULT_MAX_SKIPS
from ..images.releases import UPSTREAM
from ..core.search import RepeatPolicy
from ..prebuilt.tiers import MAP_RULES
from ..core.belief import DEFAULT_CONFIDENCE
from ..core.verification import DEFAULT_VERIFY
from .flags import (CONTAINERS, PATH, RELEASE, ROUNDS, SLURM, WHAT, Opt, declarations,
                    flag_field, opt)

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_BUILD_TIMEOUT = 6 * 3600.0


_SLURM_DEFAULTS = {f.name: f.default for f in dataclasses.fields(settings_type("slurm"))}


def _slurm(name: str, flag: str, help: str, into: str | None = None, **kw: Any) -> Opt:
    default = _SLURM_DEFAULTS[into or name]
    kw.setdefault("default", list(default) if isinstance(default, list) else default)
    if kw.get("multiple"):
        kw["default"] = ()
    return Opt(name, (flag,), "slurm", "Slurm: " + help, into, click=kw)


@dataclass(frozen=True)
class Options:
    """The question as asked, typed: every question option (each field declares its flag),
    the two directories, and the Slurm settings keyed by SlurmSettings' fields."""

    cache_dir: Path
    state: Path
    repo: str | None = flag_field(WHAT, "--repo",
        "Local path or clone URL of the repository (generic mode; default .).")
    old: str | None = flag_field(WHAT, "--old", "Revision with the old behaviour.")
    new: str | None = flag_field(WHAT, "--new",
        "Revision with the new behaviour; the search finds the first commit that behaves like "
        "it, a fix or a regression alike.")
    from_: str | None = flag_field(RELEASE, "--from",
        "Release mode: the older NGC release, image or commit.")
    to: str | None = flag_field(RELEASE, "--to",
        "Release mode: the newer release, image or commit.")
    torch_repo: str = flag_field(RELEASE, "--torch-repo",
        "PyTorch sources in release mode: a path, or a URL cloned once (blobless) into the "
        "cache dir.", default=UPSTREAM, show_default=True)
    build: str | None = flag_field(WHAT, "--build",
        "Shell command that builds the commit; it writes what the test uses into "
        "$BISECT_ARTIFACTS or the worktree, and a commit's build is kept and reused (see "
        "--rebuild).")
    test: str | None = flag_field(WHAT, "--test",
        "Shell command whose exit code is the verdict (release mode: the repro by default). "
        "Cached verdicts are keyed by its text, by the content of every file it names by an "
        "absolute, ~ or $VAR path (whatever runs it; with the files a shell script so named "
        "runs or sources, but not the targets of > and >>, nor system directories), and "
        "by the values of the $VARIABLES it names where it runs on this host. A variable "
        "a program reads without the command naming it is not keyed: name it with "
        "--key-env. --build is keyed the same way.")
    key_env: tuple[str, ...] = flag_field(WHAT, "--key-env",
        "An environment variable that the build or test reads without naming it (Python's "
        "os.environ, say): its value here joins the cache keys, so a changed value is "
        "probed again (repeatable).", multiple=True, metavar="VAR")
    timeout: float | None = flag_field(WHAT, "--timeout",
        "Seconds one test run may take; past it the run is a skip.",
        type=click.FloatRange(0, min_open=True))
    build_timeout: float = flag_field(WHAT, "--build-timeout",
        "Seconds one build may take; past it the commit is a skip (not cached).",
        type=click.FloatRange(0, min_open=True), default=DEFAULT_BUILD_TIMEOUT,
        show_default=True)
    check_torch_commit: bool | None = flag_field(
        RELEASE, "--check-torch-commit/--no-check-torch-commit",
        "Require the test's last JSON line to report torch_git_version equal to the probed "
        "commit, else the probe is a skip (default: on for the release-mode repro, off for "
        "your own --test).", default=None)
    artifacts: str | None = flag_field(RELEASE, "--artifacts",
        "Prebuilt artifacts to bisect before building (any repository): a directory, a file "
        "of URLs, or an index page URL. A probe downloads one into the artifact store and runs "
        "the test with $BISECT_ARTIFACTS pointing at it, with no build.", metavar="SPEC")
    artifact_map: str = flag_field(RELEASE, "--artifact-map",
        "How an artifact names its commit: " + ", ".join(MAP_RULES) +
        " (CMD gets the file as $1 and prints the sha).",
        default="name", show_default=True, metavar="RULE")
    overlay_rule: tuple[str, ...] = flag_field(RELEASE, "--overlay-rule",
        "Which changed files a neighbour's wheel can take as they are, so a commit whose diff "
        "to a built neighbour touches nothing else is tested on that wheel with its files put "
        "in (an overlay: about a minute, not a build). KIND is ships (installed byte for "
        "byte), never (looks like it ships but the build reads or writes it) or inert (never "
        "reaches the build: tests, docs); `*` also matches `/`. Repeatable; `pytorch` is the "
        "preset that release mode uses. Example: --overlay-rule 'ships:mypkg/*.py' "
        "--overlay-rule 'never:mypkg/_version.py'.", multiple=True, metavar="KIND:GLOB")
    no_overlay: bool = flag_field(RELEASE, "--no-overlay",
        "Build every probed commit; never test a neighbour's wheel with this commit's Python "
        "files put in.", is_flag=True)
    symptom: str | None = flag_field(RELEASE, "--symptom",
        "What goes wrong (" + ", ".join(sorted(SYMPTOMS)) + "): where images are compared "
        "component by component, its usual causes are swapped first among the components "
        "the images' configs show moved (hang: NCCL and its network stack; numerics: cuBLAS, "
        "cuDNN, TE, Triton). It orders the search; it never leaves a component out.",
        type=click.Choice(sorted(SYMPTOMS)), metavar="SYMPTOM")
    no_images: bool = flag_field(RELEASE, "--no-images",
        "Release mode: do not test the NGC images as they are before building (the endpoints' "
        "images first, then the releases in between).", is_flag=True)
    nightly_index: str | None = flag_field(RELEASE, "--nightly-index",
        "Release mode: a PEP 503 project page of nightly wheels to bisect before building. "
        "Default: PyTorch's nightly index for the base image's CUDA (e.g. "
        "https://download.pytorch.org/whl/nightly/cu126/torch/).", metavar="URL")
    nightly_urls: Path | None = flag_field(RELEASE, "--nightly-urls",
        "Release mode: nightly wheel URLs, one a line (old nightlies leave the index but stay "
        "downloadable).", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE")
    no_nightlies: bool = flag_field(RELEASE, "--no-nightlies",
        "Release mode: do not use nightly wheels.",
        is_flag=True)
    retry_skips: bool = flag_field(WHAT, "--retry-skips",
        "Probe again the commits whose cached verdict is a skip (e.g. after fixing the "
        "build); passes and failures stay cached.", is_flag=True)
    no_clean: bool = flag_field(WHAT, "--no-clean",
        "Local backend: keep every untracked file between probes; the default is "
        "`git clean -ffdx` except the --keep paths.", is_flag=True)
    keep: tuple[str, ...] = flag_field(WHAT, "--keep",
        "A path of the worktree that survives the clean between probes, for incremental "
        "builds (repeatable; PyTorch builds into build/).",
        multiple=True, default=("build",), show_default=True, metavar="PATH")
    rebuild: bool = flag_field(WHAT, "--rebuild",
        "Local backend: build every probe again, never reuse a commit's kept build (for a "
        "build that installs outside the worktree and $BISECT_ARTIFACTS, into a shared "
        "virtualenv say, which must run before each test).", is_flag=True)
    no_submodules: bool = flag_field(WHAT, "--no-submodules",
        "Do not update submodules at each checkout (for tests that need none, or when their "
        "remotes are unreachable).", is_flag=True)
    backend: str | None = flag_field(CONTAINERS, "--backend",
        "Where builds and tests run. Default: docker in release mode, else local.",
        type=click.Choice(["local", "docker", "slurm"]))
    image: str | None = flag_field(CONTAINERS, "--image",
        "Docker backend, generic recipe: the image both commands run in.")
    build_image: str | None = flag_field(CONTAINERS, "--build-image",
        "Docker backend: build in this image instead (tests still run in --image or the base "
        "image), e.g. one with compilers.")
    base_image: str | None = flag_field(CONTAINERS, "--base-image",
        "Release mode: build and test in this image instead of the older release's.")
    cuda_arch: str | None = flag_field(CONTAINERS, "--cuda-arch",
        "TORCH_CUDA_ARCH_LIST for PyTorch builds. Default: this host's GPU's compute "
        "capability.")
    max_jobs: int | None = flag_field(CONTAINERS, "--max-jobs",
        "MAX_JOBS for PyTorch builds. Default: the number of CPUs.",
        type=click.IntRange(1, 1024))
    with_: tuple[str, ...] = flag_field(RELEASE, "--with",
        "A companion installed after every probe's torch (repeat it): a wheel (path or URL), "
        "a pip requirement, git+URL@REV (built against each probed torch in its image; "
        "#build=CMD instead of `pip wheel`), transformer_engine@REV or megatron-core@REV. "
        "One that does not build or import is a skip. Docker, or Slurm with pyxis/enroot.",
        metavar="SPEC", multiple=True)
    component: str = flag_field(RELEASE, "--component",
        "Release mode: bisect this component's commits between the versions the two "
        "releases ship, built in the older image: torch, transformer_engine, or any "
        "with --component-repo.", default="torch", show_default=True, metavar="NAME")
    component_repo: str | None = flag_field(RELEASE, "--component-repo",
        "The --component's git repository (URL or path).", metavar="URL")
    component_tag: str = flag_field(RELEASE, "--component-tag",
        "How a --component version without a +hash names its tag; {version} is replaced.",
        default="v{version}", show_default=True, metavar="TEMPLATE")
    repro_args: str = flag_field(RELEASE, "--repro-args",
        "Extra flags for `python -m repro` in release mode, e.g. "
        "'--num-layers 2 --seq-length 4096'.", default="")
    gpus: str = flag_field(CONTAINERS, "--gpus",
        "GPUs for test containers: all, none, or auto (all when the engine has the nvidia "
        "runtime; release mode: all).", type=click.Choice(["auto", "all", "none"]),
        default="auto", show_default=True)
    build_tree: bool | None = flag_field(CONTAINERS, "--build-tree/--no-build-tree",
        "Docker backend: mount a persistent build/ directory per worker slot into the "
        "worktree, so neighbouring commits rebuild incrementally (default: on in release "
        "mode, off for a generic recipe).", default=None)
    artifact_store: Path | None = flag_field(RELEASE, "--artifact-store",
        "The content-addressed build store, shared by sessions and backends: a build is "
        "reused wherever commit, image and build recipe match. Default: CACHE/artifacts "
        "(Slurm: SHARED/artifacts).", type=PATH)
    metric: str | None = flag_field(None, "--metric",
        "Bisect a measurement instead of pass/fail: NAME is a number in the test's last JSON "
        "line (a dotted path for nested objects), e.g. step_ms of `python -m repro --measure`. "
        "Each commit gets runs, one at a time, until a sequential test can tell whether it is "
        "like the old endpoint or the new one; the endpoints must differ first (else exit 3). "
        "A run that exits non-zero or prints no number measured nothing, and is tried again. "
        "`probe --metric NAME` measures one commit the same way.", replay=True,
        metavar="NAME", group="metric")
    metric_cmd: str | None = flag_field(None, "--metric-cmd",
        "--metric: a shell command run after each passing test run, in the same place; its "
        "last line is the number (or a JSON object with NAME).", replay=True, metavar="CMD",
        group="metric")
    slurm: dict[str, Any] = field(default_factory=dict)

    @property
    def release_mode(self) -> bool:
        return bool(self.from_ or self.to)

    @property
    def backend_name(self) -> str:
        return self.backend or ("docker" if self.release_mode else "local")


class _Probability(click.FloatRange):
    """A FloatRange that refuses NaN (which compares false with both bounds)."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        out = super().convert(value, param, ctx)
        if math.isnan(out):
            self.fail("nan is not a probability", param, ctx)
        return out


@dataclass(frozen=True)
class RunOptions:
    """How each commit is run (the `run` group)."""

    repeat: int = flag_field(ROUNDS, "--repeat",
        "Test runs per probe (a floor: the belief asks for more where it needs them).",
        group="run", type=click.IntRange(1, 100), default=1, show_default=True)
    repeat_policy: str = flag_field(ROUNDS, "--repeat-policy",
        "Release mode, probe and components only (a bisection of commits weighs every run): "
        "any: one failing run makes the commit fail, and its runs stop there. majority: the "
        "commoner of pass/fail wins; a tie is a skip.", group="run",
        type=click.Choice([p.value for p in RepeatPolicy]), default="any", show_default=True)
    verify: int = flag_field(ROUNDS, "--verify",
        "Fresh runs of each side of the answer. A bisection the belief drives (--confidence) "
        "needs its answer seen new and its parent old in this session, once each, or this "
        "many times when given (never less than once). Release mode's tiers run the pair "
        "again, fresh and interleaved, this many times each, and components swap until one "
        "side leads by this many; the answer stands only if they agree (else ambiguous or "
        "unresolved, with the runs); 0 runs none there.", group="run",
        type=click.IntRange(0, 20), default=DEFAULT_VERIFY, show_default=True)
    confidence: float = flag_field(ROUNDS, "--confidence",
        "How sure a pass/fail answer must be before it is given: every run updates a belief "
        "over where the change is, with a flake model learnt from the runs, and the most "
        "probable answer is given once it reaches this (with its premises seen fresh); "
        "short of it within the budget, the answer is ambiguous, with the candidates' "
        "probabilities. Release mode's prebuilt tiers search by --repeat and --verify "
        "instead.", group="run", type=_Probability(0.5, 0.999999), metavar="P",
        default=DEFAULT_CONFIDENCE, show_default=True)


@dataclass(frozen=True)
class BisectOptions:
    """How a bisection goes: its rounds, its display, and where it stops."""

    jobs: int = flag_field(ROUNDS, ("--jobs", "-j"),
        "Probes per round, each in its own worktree; a round splits the range into jobs+1 "
        "parts.", group="jobs", replay=False, type=click.IntRange(1, 64), default=1,
        show_default=True)
    max_skips: int = flag_field(ROUNDS, "--max-skips",
        "Stop as ambiguous once more than this many commits between the endpoints could not "
        "be tested, naming the stretch and the commonest reason (0: never stop early).",
        group="max_skips", type=click.IntRange(0), default=DEFAULT_MAX_SKIPS,
        show_default=True)
    quiet: bool = flag_field(ROUNDS, ("--quiet", "-q"), "No progress display.", group="quiet",
                       replay=False, is_flag=True)
    no_descend: bool = flag_field(ROUNDS, "--no-descend",
        "When the answer is a merge, stop there instead of bisecting the branch it merged "
        "(from where it left to the merged parent; again, at any depth, while a merge).",
        group="no_descend", replay=False, is_flag=True)
    dry_run: bool = flag_field(ROUNDS, "--dry-run",
        "Print what the next round would run (with --backend slurm: its batch scripts) and "
        "stop; submits and builds nothing.", group="dry_run", replay=False, is_flag=True)


@dataclass(frozen=True)
class MetricOptions:
    """--metric's settings (the name and --metric-cmd are the question's)."""

    lower_is_better: bool = flag_field(None, "--lower-is-better/--higher-is-better",
        "--metric: which way is better (default lower, as for a step time); only the wording "
        "of the answer depends on it.", group="metric", default=True)
    min_change: str = flag_field(None, "--min-change",
        "--metric: the smallest relative change worth bisecting: the endpoints differ when the "
        "change is significant and at least this large with 95% confidence; they are the same "
        "when its 90% interval lies inside +-this (exit 3).", group="metric", default="2%",
        show_default=True, metavar="PCT")
    p_threshold: float = flag_field(None, "--p-threshold",
        "--metric: the error rate allowed for a false difference between the endpoints over all "
        "their looks (the k-th look uses p / (k (k + 1))); the search calls each commit at "
        "5p (at most 0.05) and the answer's pair is called again by fresh runs at p / 10.",
        group="metric", type=click.FloatRange(0, 0.25, min_open=True), default=0.01,
        show_default=True)
    runs_per_round: int = flag_field(None, "--runs-per-round",
        "--metric: runs a commit gets at most each time it is measured, one at a time, "
        "interleaved with the other commits of the round; a commit decided sooner stops.",
        group="metric", type=click.IntRange(2, 100), default=5, show_default=True)
    max_runs: int = flag_field(None, "--max-runs",
        "--metric: runs of one commit at most; a commit still unclear then is unresolved (a "
        "skip that keeps its numbers).", group="metric", type=click.IntRange(2, 1000),
        default=30, show_default=True)


ASKED = declarations(Options)
RUN, BISECT = declarations(RunOptions), declarations(BisectOptions)
MEASURE = declarations(MetricOptions)

OPTIONS: tuple[Opt, ...] = (
    *(o for o in ASKED.values() if o.group == "question" and o.name != "artifact_store"),
    *RUN.values(),
    opt("place", "cache_dir", "--cache-dir",
       "Clones, build artifacts, ccache and the release overlay. Default: $BISECT_NGC_CACHE "
       "or ~/.cache/bisect-ngc.", type=PATH),
    opt("place", "state", "--state",
       "State directory (sessions, probes, logs, result cache). Default: $BISECT_NGC_STATE "
       "or ~/.local/state/bisect-ngc.", type=PATH),
    ASKED["artifact_store"],
    _slurm("partition", "--partition", "partition for builds (CPU)."),
    _slurm("gpu_partition", "--gpu-partition", "partition for tests (GPU). Default: --partition."),
    _slurm("account", "--account", "--account for every job."),
    _slurm("qos", "--qos", "--qos for every job."),
    _slurm("time_limit", "--time", "--time for probe jobs, e.g. 4:00:00.", into="time",
           metavar="LIMIT"),
    _slurm("gpus_per_probe", "--gpus-per-probe", "GPUs for each test task.",
           type=click.IntRange(0, 64), show_default=True),
    _slurm("sbatch_args", "--sbatch-arg", "extra #SBATCH line for probe jobs (repeatable), "
           "e.g. --sbatch-arg=--constraint=h100.", multiple=True, metavar="ARG"),
    _slurm("container_runtime", "--container-runtime",
           "how probe jobs enter the image (none: bare metal, e.g. modules). enroot and pyxis "
           "import the image once per digest into a squashfs in the shared directory "
           "(SHARED/enroot/) and start every task from it.", into="runtime",
           type=click.Choice(["none", "pyxis", "enroot", "apptainer"]), show_default=True),
    _slurm("container_import", "--container-import",
           "with enroot or pyxis, import the image from its registry (docker://, credentials "
           "in ~/.config/enroot/.credentials) or from the local Docker engine (dockerd://; "
           "the image must be pulled there).", type=click.Choice(["registry", "dockerd"]),
           show_default=True),
    _slurm("shared_dir", "--shared-dir", "a directory every node sees (worktrees, wheels, "
           "verdicts). Default: STATE/slurm.", type=PATH, default=None),
    _slurm("same_node", "--same-node", "run every test job on the node of the session's "
           "first test run (--nodelist), so measurements that are compared share one machine "
           "(with --metric).", is_flag=True),
    _slurm("max_retries", "--max-retries", "resubmissions of a probe that was preempted, "
           "cancelled or lost with its node, before it counts as a skip.",
           type=click.IntRange(0, 20), show_default=True),
    BISECT["jobs"],
    BISECT["max_skips"],
    ASKED["metric"],
    ASKED["metric_cmd"],
    *MEASURE.values(),
    BISECT["quiet"],
    BISECT["no_descend"],
    BISECT["dry_run"],
    opt("sessions", "session", "--session", "Session id or prefix (default: the latest).",
       replay=False),
    # A command's own options, declared here too, so that each flag has one declaration.
    opt("probe", "commit", "--commit", "The revision to build and test.", replay=False,
       section=WHAT, required=True),
    opt("plan", "brief", "--brief", "Leave out the rendered build and test scripts.",
       replay=False, section=ROUNDS, is_flag=True),
    opt("slurm submit", "controller_partition", "--controller-partition",
       "Partition for the controller job (default: --partition).", replay=False,
       section=SLURM),
    opt("slurm submit", "controller_time", "--controller-time",
       "Time limit of the controller job.", replay=False, section=SLURM,
       default="2-00:00:00", show_default=True),
    opt("output", "as_json", "--json", "Print exactly one JSON value on stdout, also on errors.",
        replay=False, section=ROUNDS, is_flag=True, is_eager=True),
)
BY_NAME = {o.name: o for o in OPTIONS}
QUESTION = ("question", "run", "place", "slurm")      # what every question command takes
# A bisect command line: plan, probe and slurm submit take all of it, so that changing the
# verb is enough (what does not apply to a verb is accepted and has no effect there).
BISECTION = (*QUESTION, "jobs", "max_skips", "metric", "quiet", "dry_run", "no_descend")


def options(*groups_or_names: str, **override: dict[str, Any]) -> Callable[[F], F]:
    """A decorator adding these options (groups or names) in the table's order; override
    maps a name to click settings that differ for this command."""
    chosen = [o for o in OPTIONS if o.group in groups_or_names or o.name in groups_or_names]

    def apply(f: F) -> F:
        for opt in reversed(chosen):
            f = opt.decorator(**override.get(opt.name, {}))(f)
        return f
    return apply


def option(name: str, **override: Any) -> Callable[[F], F]:
    return BY_NAME[name].decorator(**override)
