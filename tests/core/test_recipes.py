"""What a cached verdict is keyed by (issue 30, findings 3 and 6): a --with wheel by its
content, a URL wheel by its hash or its size and ETag, and a test by the content of the
scripts on this host that it names. Real files, a real HTTP server on localhost."""
from __future__ import annotations

import http.server
import threading

import pytest

from tests.lib.companion_repos import wheel
from bisect_ngc.companions.sources import CompanionSources
from bisect_ngc.companions.specs import parse
from bisect_ngc.errors import UserError
from bisect_ngc.core.host_inputs import host_inputs
from bisect_ngc.core.recipes import Recipe


def recipe(tmp_path, spec: str | None = None, test: str = "true") -> Recipe:
    companions = (CompanionSources(tmp_path / "cache").resolve(parse(spec)),) if spec else ()
    return Recipe(build=None, test=test, companions=companions)


def test_a_rebuilt_wheel_of_the_same_name_is_another_test(tmp_path):
    out = tmp_path / "w"
    path = wheel(out, "kit", "1.0", {"kit/__init__.py": b"ok = True\n"}, purelib=True)
    first = recipe(tmp_path, str(path)).test_key()
    assert recipe(tmp_path, str(path)).test_key() == first          # same bytes: same key
    path.unlink()
    again = wheel(out, "kit", "1.0", {"kit/__init__.py": b"ok = False\n"}, purelib=True)
    assert again == path and recipe(tmp_path, str(path)).test_key() != first


def test_a_missing_wheel_is_one_sentence(tmp_path):
    with pytest.raises(UserError, match="no such wheel"):
        recipe(tmp_path, str(tmp_path / "kit-1.0-py3-none-any.whl"))


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(root))  # noqa
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_url_wheel_is_keyed_by_its_hash_or_its_size_and_date(tmp_path, server):
    import os
    root, base = server
    path = wheel(root, "kit", "1.0", {"kit/__init__.py": b"ok = True\n"}, purelib=True)
    url = f"{base}/{path.name}"
    first = recipe(tmp_path, url).test_key()
    path.unlink()
    wheel(root, "kit", "1.0", {"kit/__init__.py": b"ok = False  # longer\n"}, purelib=True)
    os.utime(path, (1e9, 1e9))
    assert recipe(tmp_path, url).test_key() != first                # the server says it changed
    pinned = recipe(tmp_path, url + "#sha256=" + "ab" * 32)
    assert pinned.companions[0].content == "sha256=" + "ab" * 32     # no request needed
    assert pinned.test_key() != recipe(tmp_path, url + "#sha256=" + "cd" * 32).test_key()


def test_an_unreachable_url_wheel_is_one_sentence(tmp_path):
    with pytest.raises(UserError, match="cannot read the wheel's size and ETag") as err:
        recipe(tmp_path, "http://127.0.0.1:9/kit-1.0-py3-none-any.whl")
    assert "#sha256=" in err.value.hint


def test_an_edited_test_script_is_another_test(tmp_path, monkeypatch):
    script = tmp_path / "repro.sh"
    script.write_text("exit 0\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    for test in (f"bash {script}", "bash ~/repro.sh", f"{script} --fast",
                 f"bash {script}; exit $?", f"bash {script}>log", f'sh "{script}"',
                 "python3 -u $HOME/repro.sh", f"X=1 timeout 60 bash {script}"):
        first = recipe(tmp_path, test=test).test_key()
        script.write_text("exit 1\n")
        assert recipe(tmp_path, test=test).test_key() != first, test
        script.write_text("exit 0\n")
        assert recipe(tmp_path, test=test).test_key() == first, test


def test_only_files_the_test_reads_on_this_host_count(tmp_path):
    """A relative path is the commit's own file (keyed by the commit); a folder, a path
    that does not exist here (inside a container), a system file, and a file the test
    writes (a counter, a log) are left out; a text without one keeps today's key, so
    verdicts cached before stay hits."""
    (tmp_path / "t.sh").write_text("x")
    assert host_inputs(f"./t.sh && ls {tmp_path} && /opt/in/container.py && "
                       f"grep -c cpu /proc/cpuinfo && echo 1 >> {tmp_path / 't.sh'} && "
                       f"/usr/bin/env true > {tmp_path / 't.sh'}", environment=False) == {}
    assert Recipe(build=None, test="./t.sh").test_key() == Recipe(build=None,
                                                                  test="./t.sh").test_key()
    assert list(host_inputs(f"sh {tmp_path / 't.sh'}", environment=False)["files"]) == \
        [str(tmp_path / "t.sh")]
    assert list(host_inputs(f"grep -c x {tmp_path / 't.sh'}", environment=False)["files"]) == \
        [str(tmp_path / "t.sh")]     # read, whatever runs it


@pytest.mark.slow
def test_an_edited_test_script_is_probed_again_not_answered_from_the_cache(tmp_path, run_cli):
    """Finding 6 end to end: a user edits ~/repro.sh between two runs of one command."""
    import json
    from tests.lib.repos import BUILD, TEST, make_repo
    shas = make_repo(tmp_path / "r", 20, 13)
    script = tmp_path / "repro.sh"
    script.write_text(TEST + "\n")
    argv = ["bisect", "--repo", tmp_path / "r", "--old", "main~19", "--new", "main", "--build",
            BUILD, "--test", f"bash {script}", "--state", tmp_path / "st", "--quiet", "--json"]
    code, out, _ = run_cli(argv)
    assert code == 0 and json.loads(out)["first_new"] == shas[13]
    script.write_text("exit 0\n")                # every commit passes now
    code, out, _ = run_cli(argv)
    res = json.loads(out)
    assert code == 3 and res["status"] == "invalid-endpoints" and res["cached"] == 0, res
