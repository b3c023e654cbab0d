"""The Recipe a question asks for: the generic one, the PyTorch preset in release mode,
or a component's (`--component`), with the user's companions (`--with`) resolved."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import git

from . import component_mode
from ..companions.sources import CompanionSources
from ..companions.specs import Companion, parse as parse_companion
from ..errors import UserError
from ..vcs.history import History
from .metric import with_metric_cmd
from .options import Options
from ..prebuilt.overlay import OverlayRule, RuleError
from ..core import host_gpu
from ..core.recipes import Recipe, pytorch_preset, run_words
from ..images.releases import Endpoint

DEFAULT_CUDA_ARCH = "9.0"


def component(opts: Options) -> Companion | None:
    """--component: what is bisected in release mode, when it is not PyTorch."""
    if not opts.release_mode:
        return None
    return component_mode.component_of(opts.component, opts.component_repo, opts.max_jobs)



def asked_test(opts: Options) -> str | None:
    """--test, with --metric-cmd run after each run of it where one is given."""
    if opts.test and opts.metric and opts.metric_cmd:
        return with_metric_cmd(opts.test, opts.metric_cmd, opts.metric.strip())
    return opts.test


def make_recipe(opts: Options, old: Endpoint) -> tuple[Recipe, list[str]]:
    """The one Recipe for these options, whichever backend runs it, and notes for the user
    on what was chosen for them."""
    test = asked_test(opts)
    if not opts.release_mode:      # rules.check: a --test is given
        return Recipe(build=opts.build, test=test or "", test_as_is=test, image=opts.image,
                      build_image=opts.build_image, gpus=opts.gpus,
                      build_tree=bool(opts.build_tree), clean=not opts.no_clean,
                      keep=list(opts.keep), submodules=not opts.no_submodules,
                      expect_torch_commit=bool(opts.check_torch_commit),
                      overlay=_overlay_rule(opts.overlay_rule),
                      companions=_companions(opts), timeout=opts.timeout,
                      build_timeout=opts.build_timeout, key_env=opts.key_env), []
    return _release_recipe(opts, old, test)


def _release_recipe(opts: Options, old: Endpoint, test: str | None
                    ) -> tuple[Recipe, list[str]]:
    """The PyTorch preset in the older release's image, with the options on top."""
    image = opts.base_image or opts.image or old.image
    if not image:
        raise UserError("no base image: --from is a commit, not a release",
                        hint="pass --base-image nvcr.io/nvidia/pytorch:YY.MM-py3")
    notes = []
    arch = opts.cuda_arch or host_gpu.compute_capability()
    if arch is None:
        arch = DEFAULT_CUDA_ARCH
        notes.append(f"no local GPU found: building for compute capability {arch} "
                     "(pass --cuda-arch to change it)")
    companions = _companions(opts)
    repro_args, graphs_through_te = _repro_args(opts, companions)
    if graphs_through_te:
        notes.append("--with transformer_engine: the repro graphs through TE's own "
                     "make_graphed_callables (--impl te)")
    recipe = pytorch_preset(image, cuda_arch=arch, max_jobs=opts.max_jobs,
                            repro_args=repro_args,
                            gpus="all" if opts.gpus == "auto" else opts.gpus,
                            build_tree=opts.build_tree is not False)
    recipe.timeout, recipe.build_timeout, recipe.clean = opts.timeout, opts.build_timeout, \
        not opts.no_clean
    recipe.keep, recipe.submodules = list(opts.keep), not opts.no_submodules
    recipe.key_env = opts.key_env
    if opts.build:
        recipe.build, recipe.build_image, recipe.build_dockerfile = opts.build, None, None
    if opts.build_image:
        recipe.build_image, recipe.build_dockerfile = opts.build_image, None
    if test:
        recipe.test, recipe.test_as_is, recipe.expect_torch_commit = test, test, False
        recipe.subject = "The failure"
    if opts.check_torch_commit is not None:
        recipe.expect_torch_commit = opts.check_torch_commit
    if opts.overlay_rule:
        recipe.overlay = _overlay_rule(opts.overlay_rule)
    recipe.companions = companions
    part = component(opts)
    if part is not None:
        recipe = component_mode.recipe(part, recipe, test or recipe.test_as_is or recipe.test,
                                       opts.build,
                                       _overlay_rule(opts.overlay_rule))
    return recipe, notes


def _repro_args(opts: Options, companions: tuple[Companion, ...]) -> tuple[list[str], bool]:
    """--repro-args; with a TE companion, the repro graphs through TE (--impl te), and
    whether that was added."""
    args = shlex.split(opts.repro_args)
    te = any(c.name == "transformer_engine" for c in companions) and not opts.test and \
        "--impl" not in args
    return args + ["--impl", "te"] if te else args, te


def _companions(opts: Options) -> tuple[Companion, ...]:
    """--with: each SPEC parsed, git revisions resolved to commits (through the mirrors)."""
    sources = CompanionSources(opts.cache_dir)
    return tuple(sources.resolve(parse_companion(spec, opts.max_jobs)) for spec in opts.with_)


def _overlay_rule(lines: tuple[str, ...]) -> list[str]:
    try:
        OverlayRule.parse(lines) if lines else None
    except RuleError as exc:
        raise UserError(str(exc), hint="e.g. --overlay-rule 'ships:mypkg/*.py' "
                                       "--overlay-rule 'inert:tests/*'") from None
    return list(lines)


def test_file_notes(test: str | None, history: History) -> list[str]:
    """Warnings for a test that runs a file of the user's checkout (`./mytest.sh`, `bash
    t.sh`) which git does not track: each commit is tested in a fresh worktree, at its
    top, where such a file exists only if the build makes it (`git bisect run` runs it
    from the checkout instead). A warning, not a refusal: a build may make the file."""
    top = history.repo.working_tree_dir
    if not test or history.owned or not top:
        return []
    root, here, notes = Path(top).resolve(), Path.cwd().resolve(), []
    start = "" if here == root else f"{here.relative_to(root)}/" \
        if here.is_relative_to(root) else None           # None: started outside the checkout
    for word, is_command in run_words(test):
        if word.startswith(("/", "~", "$")) or (is_command and "/" not in word):
            continue
        path = (root / word).resolve()
        if start != "" and (here / word).is_file() and not path.is_file():
            where = f"in {start}" if start else "where you started, outside the checkout"
            notes.append(f"warning: the test runs {word}, which is {where}; each commit is "
                         f"tested at the top of a fresh worktree: give its absolute path, "
                         f"{(here / word).resolve()}")
        elif path.is_file() and path.is_relative_to(root) and not _tracked(history, path, root):
            notes.append(f"warning: the test runs {word}, which git does not track; each "
                         f"commit is tested in a fresh worktree, where it exists only if "
                         f"the build makes it; a script of yours: give its absolute path, "
                         f"{path}")
    return notes


def _tracked(history: History, path: Path, root: Path) -> bool:
    """Whether git tracks the file, itself or in a submodule (a gitlink, mode 160000)."""
    rel = path.relative_to(root)
    try:
        return bool(history.repo.git.ls_files("--", str(rel))) or any(
            history.repo.git.ls_files("-s", "--", str(parent)).startswith("160000")
            for parent in list(rel.parents)[:-1])
    except git.GitCommandError:
        return True                 # git cannot tell: say nothing


def host_snapshot(recipe: Recipe) -> dict[str, Any]:
    """What the build and test read from this host now (their keys' host parts)."""
    return {"build": recipe.host(recipe.build), "test": recipe.host(recipe.test,
                                                                    recipe.test_as_is)}


def key_drift(before: dict[str, Any], recipe: Recipe) -> list[str]:
    """Warnings for host files the keys hold that changed while the bisection ran: the
    build or the test writes them, so the same command asks another question next time."""
    after = host_snapshot(recipe)
    changed = sorted({path for part in ("build", "test")
                      for files in (before[part].get("files", {}), after[part].get("files", {}))
                      for path in files
                      if before[part].get("files", {}).get(path) !=
                      after[part].get("files", {}).get(path)})
    return [f"warning: {path} changed while the bisection ran, and the cache keys hold its "
            f"content (the build or the test writes it?): the same command will start a new "
            f"session, reusing none of these verdicts. Write such a file under "
            f"$BISECT_ARTIFACTS, or with > or >>, or name it through an option the keys "
            f"know as output (-o, --log, --junitxml)" for path in changed]
