"""--with SPEC: what each form parses to, what the presets render, and the one-sentence
errors. The builds themselves run on the real Docker engine in
tests/e2e/test_companion_builds.py."""
from __future__ import annotations

import shlex
import subprocess
from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from bisect_ngc.companions.specs import Installed, PRESETS, build_script, install_prelude, parse
from bisect_ngc.errors import UserError


@pytest.mark.parametrize("spec,kind,name,source,rev", [
    ("transformer_engine@release_v2.6", "git", "transformer_engine",
     "https://github.com/NVIDIA/TransformerEngine.git", "release_v2.6"),
    ("te@abc1234", "git", "transformer_engine",
     "https://github.com/NVIDIA/TransformerEngine.git", "abc1234"),
    ("megatron-core@core_r0.9.0", "git", "megatron-core",
     "https://github.com/NVIDIA/Megatron-LM.git", "core_r0.9.0"),
    ("git+https://example.org/org/my-ext.git@v1.2", "git", "my_ext",
     "https://example.org/org/my-ext.git", "v1.2"),
    ("git+/srv/repos/comp@main", "git", "comp", "/srv/repos/comp", "main"),
    ("/wheels/comp-1.0-py3-none-any.whl", "wheel", "comp",
     "/wheels/comp-1.0-py3-none-any.whl", ""),
    ("https://x.org/a/flash_attn-2.6.3-cp312-cp312-linux_x86_64.whl", "wheel", "flash_attn",
     "https://x.org/a/flash_attn-2.6.3-cp312-cp312-linux_x86_64.whl", ""),
    ("megatron-core==0.9.0", "pip", "megatron-core", "megatron-core==0.9.0", ""),
    ("einops>=0.8,<0.9", "pip", "einops", "einops>=0.8,<0.9", ""),
])
def test_each_form_parses(spec, kind, name, source, rev):
    c = parse(spec)
    assert (c.kind, c.name, c.source, c.rev) == (kind, name, source, rev)


@pytest.mark.parametrize("spec,module", [
    ("/w/transformer_engine-2.6.0-py3-none-any.whl", "transformer_engine.pytorch"),
    ("megatron-core==0.9.0", "megatron.core"),
    ("megatron_core==0.9.0", "megatron.core"),
    ("einops>=0.8", "einops"),
    ("/w/flash_attn-2.6.3-cp312-cp312-linux_x86_64.whl", "flash_attn"),
])
def test_the_import_check_loads_what_matters(spec, module):
    """A TE wheel must load its PyTorch extension, not only its package."""
    assert parse(spec).module == module


def test_the_te_preset_renders_its_build_and_import_check():
    c = replace(parse("transformer_engine@v2.6", max_jobs=8), commit="f" * 40)
    script = build_script(c)
    assert "export NVTE_FRAMEWORK=pytorch" in script and "export MAX_JOBS=8" in script
    assert 'pip wheel --no-build-isolation --no-deps -w "$BISECT_COMPANION_OUT" .' in script
    # the probed torch goes in before the build, so TE compiles against it
    assert script.index('"$BISECT_ARTIFACTS"/*.whl') < script.index("pip wheel")
    assert c.submodules and c.compiled and c.label == "transformer_engine@ffffffffffff"
    test = install_prelude([Installed(c, "/opt/bisect-ngc/companions/0")], "python -m repro")
    assert "import transformer_engine.pytorch" in test
    assert test.rstrip().endswith("exec /bin/sh -c 'python -m repro'")
    assert not PRESETS["megatron-core"].compiled      # pure Python: any torch will do


def test_the_prelude_says_why_a_companion_cannot_load(tmp_path):
    """The rendered prelude, run by a real shell: a module that does not import makes the
    test exit 125 with a JSON skip reason that names the companion and the error."""
    c = parse("nosuchmod==1.0")
    script = install_prelude([Installed(c)], "exit 0").replace(
        "pip install", "true pip install")       # no network here: pretend it installed
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "BISECT_ARTIFACTS": str(tmp_path)})
    assert proc.returncode == 125
    assert '"skip_reason": "companion nosuchmod==1.0 does not import with this torch: ' \
           'ModuleNotFoundError' in proc.stdout
    assert "rebuild it for each" in proc.stdout     # a wheel built once: says so


@pytest.mark.parametrize("spec,says", [
    ("", "not a companion SPEC"),
    ("foo bar baz", "not a companion SPEC"),
    ("notapreset@v1", "'notapreset' is not a preset"),
    ("git+https://example.org/x.git", "needs a revision"),
    ("git+https://example.org/x.git@v1#egg=x", "unknown fragment"),
    ("transformer_engine@", "is not a revision"),
    ("transformer_engine@a..b", "is not a revision"),
    ("te@$(rm -rf /)", "is not a revision"),
])
def test_bad_specs_are_one_sentence_with_a_hint(spec, says):
    with pytest.raises(UserError) as err:
        parse(spec)
    assert says in err.value.message and err.value.hint


@given(st.text(max_size=40))
def test_any_text_parses_or_is_refused_never_crashes(text):
    try:
        c = parse(text)
    except UserError:
        return
    # whatever parsed renders into a script a shell can read
    subprocess_free = install_prelude([Installed(c, "/w")], "true")
    assert shlex.split(subprocess_free.splitlines()[-1])[0] == "exec"


def test_plan_shows_the_companions_and_te_runs_the_repro_through_te(tmp_path, run_cli,
                                                                    monkeypatch):
    """The seed's setup in one command: `--with transformer_engine@REV` in release mode
    resolves TE's revision (here a generated repository stands in for TE's URL), puts TE
    after the probed torch, and runs the repro with --impl te."""
    from tests.lib.repos import make_repo
    from tests.lib.repos import catalog
    shas = make_repo(tmp_path / "pytorch", 10, 5)
    te = make_repo(tmp_path / "te", 3, 1)
    monkeypatch.setitem(PRESETS, "transformer_engine",
                        replace(PRESETS["transformer_engine"], url=str(tmp_path / "te")))
    monkeypatch.setenv("BISECT_NGC_CATALOG",
                       str(catalog(tmp_path, [("90.01", shas[1]), ("90.02", shas[8])])))
    argv = ["plan", "--from", "90.01", "--to", "90.02", "--torch-repo", tmp_path / "pytorch",
            "--with", "transformer_engine@main", "--state", tmp_path / "st", "--cache-dir",
            tmp_path / "cache", "--no-nightlies"]
    code, out, err = run_cli(argv)
    assert code == 0, err
    assert f"with, after the probed torch: transformer_engine@{te[-1][:12]}" in out
    assert "import transformer_engine.pytorch" in out and "--impl te" in out
    assert out.index("import transformer_engine.pytorch") < out.index("python -m repro")
    argv[argv.index("transformer_engine@main")] = "transformer_engine@no-such-branch"
    code, _, err = run_cli(argv)
    assert code == 2 and "no-such-branch" in err and "is not in" in err


@pytest.mark.parametrize("version,tag,rev", [
    ("1.11.0+c27ee60", "v{version}", "c27ee60"),
    ("2.6.0+gdeadbeef1", "v{version}", "deadbeef1"),
    ("0.9.0", "v{version}", "v0.9.0"),
    ("0.9.0", "core_r{version}", "core_r0.9.0"),
    ("2.1.0+cu121", "v{version}", "v2.1.0"),       # a local part that is no hash
    ("2.9.0+20240915", "v{version}", "v2.9.0"),    # a date, not a commit
    ("1.11.0+1234567", "v{version}", "1234567"),   # a short hash of digits alone
    ("1.11.0+C27EE60.nv24.09", "v{version}", "c27ee60"),   # read as the configs read it
])
def test_a_component_version_names_its_commit(version, tag, rev):
    from bisect_ngc.question.component_mode import commit_of_version
    assert commit_of_version(version, tag) == rev


def test_a_component_tag_without_version_is_refused(tmp_path, run_cli):
    code, _, err = run_cli(["bisect", "--from", "24.09", "--to", "24.10", "--component",
                            "transformer_engine", "--component-tag", "release", "--state",
                            tmp_path / "st", "--cache-dir", tmp_path / "cache"])
    assert code == 2 and "has no {version}" in err


def test_a_companion_build_key_follows_torch_only_when_compiled():
    from bisect_ngc.companions.builds import companion_key
    te = replace(parse("transformer_engine@v2.6"), commit="a" * 40)
    mcore = replace(parse("megatron-core@core_r0.9.0"), commit="b" * 40)
    key = lambda c, d, t: companion_key(c, "img", d, t)          # noqa: E731
    assert key(te, "sha256:1", "torch-A") != key(te, "sha256:1", "torch-B")
    assert key(mcore, "sha256:1", "torch-A") == key(mcore, "sha256:1", "torch-B")
    assert key(te, "sha256:1", "t") != key(te, "sha256:2", "t")      # another image
    assert key(te, "nvcr.io/nvidia/pytorch@sha256:1", "t") == key(te, "sha256:1", "t")
    assert key(te, "sha256:1", "t") != key(replace(te, commit="c" * 40), "sha256:1", "t")


def test_a_component_build_depends_on_its_commit_alone():
    """--component: no build tree is kept across commits (the worktree is cleaned in
    full, `build/` included) and no torch commit is expected of the test."""
    from bisect_ngc.question.component_mode import component_of, recipe
    from bisect_ngc.core.recipes import Recipe
    base = Recipe(build="make", test="t", image="img", keep=["build", "data"],
                  build_tree=True, expect_torch_commit=True, overlay=["pytorch"])
    r = recipe(component_of("transformer_engine", None, None), base, "run-test", None, [])
    assert r.keep == ["data"] and not r.build_tree and not r.expect_torch_commit
    assert r.overlay == ["transformer_engine"] and r.bisected == "transformer_engine"
    assert 'cd "$BISECT_COMPANION_SRC"' in r.build
    assert 'BISECT_COMPANION_SRC="$BISECT_WORKTREE"' in r.build
    assert r.test_as_is == "run-test" and "import transformer_engine.pytorch" in r.test
