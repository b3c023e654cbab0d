"""The release catalog, release-mode ranges, and the PyTorch preset's rendered recipe.

The packaged catalog names real PyTorch commits; GitHub is not reachable here, so the
tests that need a PyTorch repository give a catalog of their own (BISECT_NGC_CATALOG)
naming commits of a generated repository.
"""
from __future__ import annotations

import json
import shlex

import pytest

from bisect_ngc.errors import UserError
from bisect_ngc.core.recipes import pytorch_preset
from bisect_ngc.images.releases import Catalog

from tests.lib.repos import BUILD, TEST, make_repo



def test_acceptance_commits_of_24_09_and_24_10(run_cli):
    for release, sha in (("24.09", "b465a5843b92f33fe3e89ff7ee91c6833df6aec0"),
                         ("24.10", "e000cf0ad980e5d140dc895a646174e9b945cf26")):
        code, out, _ = run_cli(["resolve", release, "--json"])
        facts = json.loads(out)
        assert code == 0 and facts["torch_commit"] == sha
        assert facts["image"] == f"nvcr.io/nvidia/pytorch:{release}-py3"
        assert facts["torch_version"].endswith("+" + sha[:10])


def test_catalog_covers_24_01_onward_with_verification_marks():
    cat = Catalog.load(None)
    names = cat.names()
    assert names[0] == "24.01" and "25.06" in names
    for rel in cat.all():
        assert rel.torch_verified in ("V1", "V2", "U")
        if rel.torch_version:
            assert rel.torch_commit and rel.torch_version.split("+")[1][:7] == \
                rel.torch_commit[:7]


@pytest.mark.parametrize("a,b", [("24.11", "24.12"), ("25.05", "25.06")])
def test_releases_with_the_same_commit_are_reported(a, b, run_cli):
    code, out, _ = run_cli(["releases", "--json"])
    rows = {r["name"]: r for r in json.loads(out)}
    assert b in rows[a]["same_commit_as"] and a in rows[b]["same_commit_as"]
    code, out, _ = run_cli(["releases"])
    assert code == 0 and f"same commit as {b}" in out


def test_unknown_release_lists_the_known_ones(run_cli):
    code, _, err = run_cli(["resolve", "23.01"])
    assert code == 2 and "unknown release '23.01'" in err and "24.09" in err
    assert "resolve --image" in err
    code, _, err = run_cli(["plan", "--from", "22.12", "--to", "24.10"])
    assert code == 2 and "unknown release '22.12'" in err


def test_release_without_a_known_commit_says_how_to_get_it(run_cli):
    code, _, err = run_cli(["plan", "--from", "25.07", "--to", "25.08"])
    assert code == 2 and "not known" in err
    assert "resolve --image nvcr.io/nvidia/pytorch:25.07-py3" in err


def test_image_not_in_catalog_suggests_resolve(run_cli):
    code, _, err = run_cli(["plan", "--from", "example.com/my/pytorch:1", "--to", "24.10"])
    assert code == 2 and "bisect-ngc resolve --image example.com/my/pytorch:1" in err


def test_plan_24_09_to_24_10_shows_image_and_recipe_without_the_repo(tmp_path, run_cli):
    args = ["plan", "--from", "24.09", "--to", "24.10", "--backend", "docker",
            "--torch-repo", str(tmp_path / "no-clone-here"), "--cache-dir", str(tmp_path)]
    code, out, err = run_cli(args)
    assert "base image: nvcr.io/nvidia/pytorch:24.09-py3" in out
    assert "python setup.py bdist_wheel" in out and "python -m repro" in out
    assert "candidates: unknown" in out
    # The recipe is printed, but a plan without its candidates is not a success.
    assert code == 2 and "cannot list the candidates" in err and "hint:" in err
    code, out, _ = run_cli(args + ["--json", "--cuda-arch", "8.0;9.0"])
    plan = json.loads(out)
    assert code == 2 and plan["n_candidates"] is None
    assert plan["recipe"]["base_image"] == "nvcr.io/nvidia/pytorch:24.09-py3"
    assert plan["endpoints"]["old"]["rev"] == "b465a5843b92f33fe3e89ff7ee91c6833df6aec0"
    assert "export TORCH_CUDA_ARCH_LIST='8.0;9.0'" in plan["recipe"]["build"]
    assert not list(tmp_path.glob("artifacts/*"))


def test_plan_shows_one_recipe_whatever_the_backend(fake_torch, tmp_path, run_cli):
    repo, _ = fake_torch
    recipes = {}
    for backend in ("docker", "slurm"):
        code, out, err = run_cli(["plan", "--from", "90.02", "--to", "90.03", "--torch-repo",
                                  repo, "--backend", backend, "--cuda-arch", "9.0",
                                  "--state", tmp_path / "st", "--json"])
        assert code == 0, err
        recipes[backend] = json.loads(out)["recipe"]
    assert recipes["docker"] == recipes["slurm"]
    assert "python setup.py bdist_wheel" in recipes["slurm"]["build"]
    assert "python -m repro" in recipes["slurm"]["test"]
    assert recipes["slurm"]["expect_torch_commit"] is True


@pytest.fixture
def fake_torch(tmp_path, monkeypatch):
    """A generated 'pytorch' repository and a catalog whose releases point into it."""
    shas = make_repo(tmp_path / "pytorch", 120, 70)
    catalog = tmp_path / "catalog.tsv"
    rows = [("90.01", shas[10]), ("90.02", shas[60][:10]), ("90.03", shas[100]),
            ("90.04", shas[100])]
    catalog.write_text("release\ttorch_version\ttorch_commit\ttorch_verified\tcuda\t"
                       "cuda_verified\ttransformer_engine\tte_verified\tpython\tubuntu\n" +
                       "".join(f"{r}\t2.9.0a0+{c[:10]}\t{c}\tV1\t12.9\tU\t2.0\tU\t3.12\t24.04\n"
                               for r, c in rows))
    monkeypatch.setenv("BISECT_NGC_CATALOG", str(catalog))
    return tmp_path / "pytorch", shas


@pytest.mark.slow
def test_release_mode_bisect_resolves_releases_to_commits(fake_torch, tmp_path, run_cli):
    repo, shas = fake_torch
    code, out, err = run_cli(["bisect", "--from", "90.02", "--to", "90.03", "--torch-repo",
                              str(repo), "--backend", "local", "--build", BUILD, "--test", TEST,
                              "--state", str(tmp_path / "st"), "--quiet", "--json"])
    assert code == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[70] and res["n_candidates"] == 40
    code, out, _ = run_cli(["status", "--state", str(tmp_path / "st"), "--json"])
    labels = json.loads(out)[0]["labels"]
    assert labels["old_release"] == "90.02"
    assert labels["old_image"] == "nvcr.io/nvidia/pytorch:90.02-py3"


def test_containing_tells_which_release_first_ships_a_commit(fake_torch, run_cli):
    repo, shas = fake_torch
    code, out, _ = run_cli(["releases", "--containing", shas[70], "--torch-repo", str(repo),
                            "--json"])
    rows = {r["name"]: r["contains"] for r in json.loads(out)}
    assert rows == {"90.01": "no", "90.02": "no", "90.03": "yes", "90.04": "yes"}
    code, out, _ = run_cli(["releases", "--containing", shas[70][:9], "--torch-repo",
                            str(repo)])
    assert code == 0 and "first shipped in NGC 90.03" in out
    code, _, err = run_cli(["releases", "--containing", "feedface", "--torch-repo", str(repo)])
    assert code == 2 and "not in" in err


def test_containing_a_commit_the_catalog_names_needs_no_clone(fake_torch, tmp_path, run_cli):
    _, shas = fake_torch
    nowhere = "https://nowhere.invalid/pytorch.git"      # cloning it would fail at once
    code, out, err = run_cli(["releases", "--containing", shas[100][:10], "--torch-repo",
                              nowhere, "--cache-dir", tmp_path / "c", "--json"])
    assert code == 0, err
    rows = {r["name"]: r["contains"] for r in json.loads(out)}
    assert rows == {"90.01": "unknown", "90.02": "unknown", "90.03": "yes", "90.04": "yes"}
    code, out, _ = run_cli(["releases", "--containing", shas[100], "--torch-repo", nowhere,
                            "--cache-dir", tmp_path / "c"])
    assert code == 0 and "shipped in NGC 90.03, 90.04" in out and "earlier release" in out
    code, _, err = run_cli(["releases", "--containing", shas[70], "--torch-repo", nowhere,
                            "--cache-dir", tmp_path / "c"])
    assert code == 2 and "could not clone" in err       # not in the catalog: the repo decides


def test_the_commit_column_has_one_width(fake_torch, run_cli):
    code, out, _ = run_cli(["releases"])
    cells = [line.split("│")[3].strip() for line in out.splitlines() if line.startswith("│ 90.")]
    assert code == 0 and len(cells) == 4 and len({len(c) for c in cells}) == 1, cells


def test_from_and_to_accept_commits_and_need_a_base_image(fake_torch, tmp_path, run_cli):
    repo, shas = fake_torch
    code, _, err = run_cli(["plan", "--from", shas[5], "--to", "90.03", "--torch-repo",
                            str(repo)])
    assert code == 2 and "--base-image" in err
    code, out, _ = run_cli(["plan", "--from", shas[5], "--to", "90.03", "--torch-repo",
                            str(repo), "--base-image", "nvcr.io/nvidia/pytorch:90.01-py3",
                            "--json"])
    plan = json.loads(out)
    assert code == 0 and plan["n_candidates"] == 95
    assert plan["endpoints"]["new"]["release"]["name"] == "90.03"


@pytest.mark.parametrize("argv,words", [
    (["--from", "24.09"], "--from and --to go together"),
    (["--from", "24.09", "--to", "24.10", "--old", "x"], "either --from/--to"),
    (["--old", "a"], "--old and --new, or --from and --to"),
    (["--old", "a", "--new", "b", "--backend", "docker", "--test", "t"], "needs --image"),
])
def test_question_errors(argv, words, run_cli):
    code, _, err = run_cli(["plan", *argv])
    assert code == 2 and words in err


def test_pytorch_preset_renders_image_arch_and_wheel_output():
    recipe = pytorch_preset("nvcr.io/nvidia/pytorch:24.09-py3", cuda_arch="9.0", max_jobs=12,
                            repro_args=["--num-layers", "4", "--seq-length", "4096"])
    assert recipe.image == "nvcr.io/nvidia/pytorch:24.09-py3"
    assert recipe.build_dockerfile.startswith("# Rendered") and \
        "FROM nvcr.io/nvidia/pytorch:24.09-py3" in recipe.build_dockerfile
    assert not [ln for ln in recipe.build_dockerfile.splitlines() if ln.startswith("RUN --mount")]
    build = recipe.build
    for line in ("export TORCH_CUDA_ARCH_LIST=9.0", "export MAX_JOBS=12", "export BUILD_TEST=0",
                 'python setup.py bdist_wheel --dist-dir "$BISECT_ARTIFACTS"'):
        assert line in build
    assert "pip install --no-deps --force-reinstall" in recipe.test
    assert "exec python -m repro --num-layers 4 --seq-length 4096" in recipe.test
    assert recipe.expect_torch_commit and recipe.build_tree
    assert recipe.mounts[0].container == "/opt/bisect-ngc/repro"
    assert (recipe.mounts[0].host / "verdict.py").exists()


def test_pytorch_preset_quotes_every_value():
    nasty = "9.0; rm -rf / #"
    recipe = pytorch_preset("img", cuda_arch=nasty, repro_args=["--seed", "$(reboot)"],
                            extra_env={"EVIL": "`id`"})
    assert f"export TORCH_CUDA_ARCH_LIST={shlex.quote(nasty)}" in recipe.build
    assert "export EVIL='`id`'" in recipe.build
    assert "python -m repro --seed '$(reboot)'" in recipe.test


def test_resolve_needs_a_release_or_an_image(run_cli):
    code, _, err = run_cli(["resolve"])
    assert code == 2 and "either a release" in err


def test_catalog_endpoint_kinds():
    cat = Catalog.load(None)
    assert cat.endpoint("24.09").kind == "release"
    assert cat.endpoint("nvcr.io/nvidia/pytorch:24.10-py3").release.name == "24.10"
    assert cat.endpoint("abc123").kind == "commit"
    with pytest.raises(UserError):
        cat.endpoint("Not An Image:!!")


def test_plan_shows_the_images_first_then_builds_in_the_narrowed_release(fake_torch, run_cli):
    repo, shas = fake_torch
    code, out, err = run_cli(["plan", "--from", "90.01", "--to", "90.03", "--torch-repo",
                              str(repo), "--backend", "docker", "--build", BUILD, "--test", TEST,
                              "--json"])
    assert code == 0, err
    images, builds = json.loads(out)["tiers"]
    assert images["points"] == ["NGC 90.01", "NGC 90.02", "NGC 90.03"]
    assert images["expected_probes"] == 3 and builds["widest"] == 50
    assert builds["base_image"].startswith("the older of the two adjacent releases")
    assert builds["expected_probes"] == 2 + 6          # both ends, then ⌈log2 50⌉
    code, out, _ = run_cli(["plan", "--from", "90.01", "--to", "90.03", "--torch-repo",
                            str(repo), "--backend", "docker", "--build", BUILD, "--test", TEST])
    assert "first, images as they are (no build): NGC 90.01, NGC 90.02, NGC 90.03" in out
    code, out, _ = run_cli(["plan", "--from", "90.01", "--to", "90.03", "--torch-repo",
                            str(repo), "--backend", "docker", "--no-images", "--build", BUILD,
                            "--test", TEST, "--json"])
    assert json.loads(out)["tiers"] == []


def test_transformer_engine_commit_from_its_version_and_in_the_listings(tmp_path, monkeypatch,
                                                                       run_cli):
    from bisect_ngc.images.releases import release_from_facts
    from bisect_ngc.images.image_config import commit_in
    assert commit_in("1.11.0+c27ee60") == "c27ee60"
    assert commit_in("2.0.0") == "" and commit_in("1.6.0+cuda12") == ""
    rel = release_from_facts("nvcr.io/nvidia/pytorch:24.10-py3", {
        "torch_version": "2.5.0a0+e000cf0ad9", "torch_git_version": "e000cf0ad9",
        "transformer_engine": "1.11.0+c27ee60", "python": "3.10.12"})
    assert rel.te_commit == "c27ee60" and rel.te_verified == "live"
    # The packaged catalog has the column (unknown commits are empty, never made up).
    code, out, _ = run_cli(["releases", "--json"])
    assert code == 0 and all("te_commit" in row for row in json.loads(out))
    catalog = tmp_path / "catalog.tsv"
    catalog.write_text("release\ttorch_version\ttorch_commit\ttorch_verified\tcuda\t"
                       "cuda_verified\ttransformer_engine\tte_verified\tte_commit\tpython\t"
                       "ubuntu\n91.01\t2.9.0a0+abc\tabc\tV1\t12.9\tU\t2.6\tV1\t1234abcd\t3.12\t"
                       "24.04\n")
    monkeypatch.setenv("BISECT_NGC_CATALOG", str(catalog))
    code, out, _ = run_cli(["releases"])
    assert code == 0 and "2.6 (1234abcd) [V1]" in out
    code, out, _ = run_cli(["resolve", "91.01", "--json"])
    assert json.loads(out)["te_commit"] == "1234abcd"


def test_two_releases_of_the_same_torch_commit_build_nothing_and_say_where_to_look(
        fake_torch, tmp_path, run_cli):
    repo, _ = fake_torch        # 90.03 and 90.04 ship the same commit
    code, out, err = run_cli(["bisect", "--from", "90.03", "--to", "90.04", "--torch-repo",
                              str(repo), "--backend", "local", "--build", BUILD, "--test", TEST,
                              "--state", str(tmp_path / "st"), "--quiet"])
    assert code == 2 and "90.03 and 90.04 ship the same PyTorch commit" in err
    assert "bisect-ngc components --from 90.03 --to 90.04" in err


def test_a_symptom_outside_release_mode_is_one_sentence(tmp_path, run_cli):
    code, _, err = run_cli(["bisect", "--repo", str(tmp_path), "--old", "a", "--new", "b",
                            "--test", "true", "--symptom", "hang", "--quiet"])
    assert code == 2 and "--symptom orders release mode's component swaps" in err
    code, _, err = run_cli(["bisect", "--from", "24.09", "--to", "24.10", "--symptom", "sad"])
    assert code == 2 and "sad" in err
