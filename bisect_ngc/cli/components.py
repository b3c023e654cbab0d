"""`components`: which part of the container made the difference (Docker)."""
from __future__ import annotations

from pathlib import Path

import click

from ..attribution.components import Evidence
from .help_sections import RichCommand
from ..attribution.swap_probes import Attributor
from ..errors import EXIT_INVALID_ENDPOINTS, UserError
from .json_output import emit, json_option
from .progress import say
from .summary_text import print_config_diff
from ..question.flags import default_cache
from ..question.options import option
from ..core.recipes import test_identity
from ..images.releases import IMAGE_RE, RELEASE_RE, Catalog
from ..core.search import RepeatPolicy

EXIT_NOT_ATTRIBUTED = 4


def _image(catalog: Catalog, spec: str) -> str:
    if RELEASE_RE.match(spec):
        return catalog.get(spec).image
    if not IMAGE_RE.match(spec):
        raise UserError(f"'{spec}' is neither a release nor an image",
                        hint="use a release like 24.09 or an image like "
                             "nvcr.io/nvidia/pytorch:24.09-py3")
    return spec


@click.command(cls=RichCommand)
@option("from_", required=True, metavar="A",
        help="The image (or catalog release) with the old behaviour.")
@option("to", required=True, metavar="B", help="The image (or release) with the new one.")
@option("test", required=True, help="Shell command run in each container; its exit code is "
        "the verdict (0 pass, 125 cannot test, else fail).")
@click.option("--only", metavar="UNIT", multiple=True,
              help="Search only these differing components (repeat it), named as the table "
                   "names them: py:NAME, lib:NAME or env:NAME.")
@option("symptom")
@option("repeat", help="Test runs per swap and per image as it is, for flaky tests.")
@option("repeat_policy")
@option("verify")
@option("cache_dir")
@json_option
def components(from_: str, to: str, test: str, only: tuple[str, ...], symptom: str | None,
               repeat: int, repeat_policy: str, verify: int, cache_dir: Path | None,
               as_json: bool) -> int:
    """Which part of the container makes image B behave unlike image A.

    Inventories both images (Python distributions with their files, shared libraries in
    the CUDA and system library directories, environment variables), then runs A with
    sets of B's differing components put in place (swap probes), narrowing them by delta
    debugging to a 1-minimal set. A swap that cannot run is a skip, never a verdict: it is
    searched around, or the answer is "unresolved". Fresh swaps confirm the answer before
    it is given (--verify): the set turns A into B, no component of it can go, and B with
    A's set turns back. Every swap is kept: the same command resumes.

    \b
    Example: does Transformer Engine alone make 24.10 behave unlike 24.09?
      bisect-ngc components --from 24.09 --to 24.10 --test 'python -m repro' \\
          --only py:transformer_engine
    """
    cache = default_cache(cache_dir)
    catalog = Catalog.load(cache)
    images = [_image(catalog, spec) for spec in (from_, to)]
    from ..backends.docker.engine import DockerContainers      # the SDK only where it is used
    evidence = Evidence(repeat, RepeatPolicy(repeat_policy), verify)
    result = Attributor(images[0], images[1], test, cache / "components", DockerContainers(),
                        say, evidence, test_identity(test), symptom).run(only)
    answer = result["attribution"]
    if as_json:
        emit(dict(result, attribution=dict(status=answer.status, culprits=list(answer.culprits),
                                           explanation=answer.explanation)))
    else:
        click.echo(f"{len(result['components'])} component(s) differ; as they are, A gives "
                   f"{result['outcomes']['a']} and B {result['outcomes']['b']}.")
        culprits = set(answer.culprits)
        cannot = result.get("unswappable", {})
        for c in result["components"]:
            mark = "  <- culprit" if c["unit"] in culprits else \
                "  (no swap: it is not in B)" if c["unit"] in cannot else ""
            click.echo(f"  {c['unit']:<32} {c['in_a'] or '-':<24} {c['in_b'] or '-'}{mark}")
        print_config_diff(result)
        click.echo(f"{answer.status}: {answer.explanation}.")
        click.echo(f"{len(result['swaps'])} swap(s) searched, {len(result['checks'])} fresh "
                   f"swap(s) checked the answer (--verify {verify}).")
        if any(u.startswith("py:torch") for u in culprits):
            click.echo(f"next, PyTorch's commits between them: bisect-ngc bisect --from {from_} "
                       f"--to {to}")
    if answer.status == "invalid-endpoints":
        return EXIT_INVALID_ENDPOINTS
    return 0 if answer.status == "found" else EXIT_NOT_ATTRIBUTED
