import os

import pytest
from hypothesis import settings

# Property tests: their own example counts in CI; few in the one-minute loop
# (HYPOTHESIS_PROFILE=dev, set by `scripts/test.sh --fast`; tests/lib/properties.py).
settings.register_profile("ci", deadline=None)
settings.register_profile("dev", max_examples=10, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

from bisect_ngc.cli.main import main
from tests.lib.slurm_cluster import cancel_jobs_under

# Tests make commits; give git an identity without touching anyone's config.
for key, value in {"GIT_AUTHOR_NAME": "bisect-ngc tests", "GIT_AUTHOR_EMAIL": "tests@example.com",
                   "GIT_COMMITTER_NAME": "bisect-ngc tests",
                   "GIT_COMMITTER_EMAIL": "tests@example.com"}.items():
    os.environ.setdefault(key, value)


@pytest.fixture
def run_cli(capsys):
    """Run `bisect-ngc ARGS` in this process: returns (exit code, stdout, stderr)."""
    def run(args):
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


def pytest_collection_modifyitems(items):
    """Tests of real engines, clusters and GPUs are slow too: `-m "not slow"` is the fast
    unit layer (under a minute)."""
    for item in items:
        if any(item.get_closest_marker(m) for m in ("docker", "slurm", "gpu", "registry")):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _slurm_jobs_end_with_their_test(request):
    """A Slurm test's jobs go when it ends, passed or not, so one failure cannot hold the
    node for the tests after it."""
    if request.node.get_closest_marker("slurm") is None:
        yield
        return
    root = request.getfixturevalue("tmp_path")
    yield
    cancel_jobs_under(root)
