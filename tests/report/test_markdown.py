"""Golden tests of the markdown report, rendered from sessions of real bisections.

Each report is parsed with markdown-it-py: the probe table has one row per probe, every
link is a well-formed URL or a relative path that exists, and no absolute path of this
machine appears in the text or the picture.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlparse

import pytest
from markdown_it import MarkdownIt

from bisect_ngc.report.markdown import github_slug
from bisect_ngc.core.records import SessionStatus
from bisect_ngc.core.store import Store

from tests.lib.repos import BUILD, TEST, make_repo



def bisect(run_cli, tmp_path, repo, *extra, test=TEST):
    return run_cli(["bisect", "--repo", str(repo), "--old", "main~%d" % (len(
        subprocess.run(["git", "rev-list", "--first-parent", "main"], cwd=repo,
                       capture_output=True, text=True).stdout.split()) - 1), "--new", "main",
        "--build", BUILD, "--test", test, "--state", str(tmp_path / "st"), "--cache-dir",
        str(tmp_path / "cache"), "--quiet", "--json", *extra])


def sections(md: str) -> dict[str, list]:
    """Tokens grouped under each level-2 heading."""
    tokens = MarkdownIt().enable("table").parse(md)
    out, current = {}, "_top"
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.tag == "h2":
            current = tokens[i + 1].content
            out[current] = []
        else:
            out.setdefault(current, []).append(tok)
    return out


def table_rows(tokens) -> list[list[str]]:
    rows, row, in_body = [], None, False
    for tok in tokens:
        if tok.type == "tbody_open":
            in_body = True
        elif tok.type == "tbody_close":
            break
        elif in_body and tok.type == "tr_open":
            row = []
        elif in_body and tok.type == "inline" and row is not None:
            row.append(tok.content)
        elif in_body and tok.type == "tr_close":
            rows.append(row)
    return rows


def links(md: str) -> list[str]:
    found = []
    for tok in MarkdownIt().enable("table").parse(md):
        for child in tok.children or []:
            if child.type == "link_open":
                found.append(child.attrs["href"])
            if child.type == "image":
                found.append(child.attrs["src"])
    return found


def check_report(path: Path, tmp_path: Path, n_probes: int) -> str:
    md = path.read_text()
    secs = sections(md)
    assert len(table_rows(secs["Probes"])) == n_probes
    for href in links(md):
        url = urlparse(href)
        if url.scheme:
            assert url.scheme == "https" and url.netloc == "github.com" and url.path, href
        else:
            assert not href.startswith("/"), href
            assert (path.parent / href).exists(), href
    svg = path.with_name(path.stem + "-narrowing.svg")
    prose = re.sub(r"## Reproduce.*?\n## ", "## ", md, flags=re.S)   # commands run as printed
    prose = re.sub(r"- (Test|Build):\n\n```sh\n.*?```", "", prose, flags=re.S)  # and scripts
    for text in (prose, svg.read_text()):
        assert str(tmp_path) not in text and os.path.realpath(tmp_path) not in text
        assert not re.search(r"(?<![\w.:/-])/(tmp|root|home|work|var|usr)/", text), text
    ET.fromstring(svg.read_text())
    return md


@pytest.mark.slow
def test_found_report_names_the_commit_and_has_every_probe(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 300, 150, set(range(40, 52)), pr_every=1)
    code, out, _ = bisect(run_cli, tmp_path, tmp_path / "r", "--jobs", "3")
    res = json.loads(out)
    assert code == 0
    path = Path(res["report"])
    assert path.exists() and path.parent == tmp_path / "st" / "reports"
    probes = Store(tmp_path / "st").probes(res["session"])
    md = check_report(path, tmp_path, len(probes))
    assert f"**The failure was introduced by `{shas[150][:12]}`: change 150 (#1150)**" in md
    assert shas[150] in md and "Dev 3" in md
    evidence = "".join(t.content for t in sections(md)["Evidence"] if t.type == "inline")
    assert shas[149][:12] in evidence and shas[150][:12] in evidence
    rounds = table_rows(sections(md)["How the range narrowed"])
    assert len(rounds) == res["rounds"] and rounds[-1][-1] == "0"
    repro = "".join(t.content for t in sections(md)["Reproduce"] if t.type == "fence")
    assert f"--commit {shas[150]}" in repro and f"--commit {shas[149]}" in repro
    assert "$BISECT_NGC_STATE" in repro


@pytest.mark.slow
def test_second_run_report_marks_cached_probes(tmp_path, run_cli):
    make_repo(tmp_path / "r", 64, 40)
    bisect(run_cli, tmp_path, tmp_path / "r")
    code, out, _ = bisect(run_cli, tmp_path, tmp_path / "r")
    res = json.loads(out)
    md = check_report(Path(res["report"]), tmp_path, res["probes"] + res["cached"])
    rows = table_rows(sections(md)["Probes"])
    fresh = [r for r in rows if r[-1] != "yes"]       # the answer's premises, seen again
    assert res["probes"] == len(fresh) == 2
    assert {r[2].strip("`") for r in fresh} == {res["first_new"][:12], res["last_old"][:12]}
    evidence = "".join(t.content for t in sections(md)["Evidence"] if t.type == "inline")
    assert "from the result cache" not in evidence      # the premises were seen afresh


def test_ambiguous_report_lists_the_candidates(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 50, 25, {23, 24, 25})
    code, out, _ = bisect(run_cli, tmp_path, tmp_path / "r")
    res = json.loads(out)
    assert code == 4
    md = check_report(Path(res["report"]), tmp_path, len(Store(tmp_path / "st").probes(
        res["session"])))
    assert "**Ambiguous" in md
    top = sections(md)["_top"]
    cand_rows = table_rows(top)
    assert [r[0].strip("`")[:12] for r in cand_rows] == [s[:12] for s in shas[23:27]]
    assert any("build failed" in r[2] for r in cand_rows)


def test_invalid_endpoints_report(tmp_path, run_cli):
    make_repo(tmp_path / "r", 20, 99)
    code, out, _ = bisect(run_cli, tmp_path, tmp_path / "r")
    res = json.loads(out)
    assert code == 3
    md = check_report(Path(res["report"]), tmp_path, 2)
    assert "**Invalid endpoints: both endpoints pass" in md


def test_swaps_that_could_not_run_are_listed_with_their_reasons(tmp_path, run_cli):
    """A not-in-commits answer whose attribution left a component out: the report lists
    the skipped swaps and why, from the stored result alone."""
    from dataclasses import replace
    make_repo(tmp_path / "r", 20, 99)
    res = json.loads(bisect(run_cli, tmp_path, tmp_path / "r")[1])
    store = Store(tmp_path / "st")
    rec = store.session(res["session"])
    components = {"status": "found", "culprits": ["py:gamma"], "explanation": "A with B's "
                  "py:gamma behaves like B (py:omega could not be put into A and were left out)",
                  "images": {"a": "img:a", "b": "img:b"}, "unswappable": {},
                  "components": [{"unit": "py:gamma", "in_a": "1.0", "in_b": "2.0"},
                                 {"unit": "py:omega", "in_a": "1.0", "in_b": "2.0"}],
                  "swaps": [{"into": "a", "components": ["py:gamma", "py:omega"],
                             "side": "skip", "why": "does not load: ModuleNotFoundError: "
                                                    "No module named 'omega._ext'"},
                            {"into": "a", "components": ["py:gamma"], "side": "b"}]}
    store.set_status(rec.id, SessionStatus.NOT_IN_COMMITS,
                     replace(rec.result, status="not-in-commits", explanation="x",
                             components=components))
    code, out, _ = run_cli(["report", "--state", str(tmp_path / "st"), "-o",
                            str(tmp_path / "r.md")])
    md = (tmp_path / "r.md").read_text()
    assert code == 0 and "Swaps that could not run (skips, never verdicts):" in md
    assert "- `py:gamma`, `py:omega` into A: does not load: ModuleNotFoundError" in md
    assert "| `py:gamma` | 1.0 | 2.0 | **culprit** |" in md


@pytest.mark.slow
def test_interrupted_and_running_sessions_render(tmp_path, run_cli):
    make_repo(tmp_path / "r", 200, 120)
    counter = tmp_path / "count"
    slow = f'echo x >> {counter}; sleep 0.3; ' + TEST
    args = [sys.executable, "-m", "bisect_ngc", "bisect", "--repo", str(tmp_path / "r"),
            "--old", "main~199", "--new", "main", "--build", BUILD, "--test", slow, "--state",
            str(tmp_path / "st"), "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    while not counter.exists() or len(counter.read_text().split()) < 4:
        assert time.monotonic() < end
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    store = Store(tmp_path / "st")
    sid = store.latest().id
    path = tmp_path / "st" / "reports" / f"{sid}.md"
    md = check_report(path, tmp_path, len(store.probes(sid)))
    assert "**Interrupted: no answer yet.**" in md
    store.set_status(sid, SessionStatus.RUNNING)
    code, out, _ = run_cli(["report", "--state", str(tmp_path / "st"), "-o",
                            str(tmp_path / "elsewhere" / "r.md")])
    assert code == 0 and out.strip() == str(tmp_path / "elsewhere" / "r.md")
    md = check_report(tmp_path / "elsewhere" / "r.md", tmp_path, len(store.probes(sid)))
    assert "**Still running: no answer yet.**" in md


@pytest.mark.slow
def test_github_links_and_where_it_ships(tmp_path, run_cli, monkeypatch):
    shas = make_repo(tmp_path / "pytorch", 80, 50, pr_every=1)
    catalog = tmp_path / "catalog.tsv"
    catalog.write_text("release\ttorch_version\ttorch_commit\ttorch_verified\tcuda\t"
                       "cuda_verified\ttransformer_engine\tte_verified\tpython\tubuntu\n" +
                       "".join(f"{r}\t2.9.0a0+{c[:10]}\t{c}\tV1\t12.9\tU\t2.0\tU\t3.12\t24.04\n"
                               for r, c in (("90.01", shas[20]), ("90.02", shas[60]),
                                            ("90.03", shas[79]))))
    monkeypatch.setenv("BISECT_NGC_CATALOG", str(catalog))
    code, out, _ = run_cli(["bisect", "--from", "90.01", "--to", "90.02", "--torch-repo",
                            str(tmp_path / "pytorch"), "--backend", "local", "--build", BUILD,
                            "--test", TEST, "--state", str(tmp_path / "st"), "--cache-dir",
                            str(tmp_path / "cache"), "--quiet", "--json"])
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[50]
    md = check_report(Path(res["report"]), tmp_path, res["probes"])
    assert "is first shipped in **NGC 90.02**" in md
    ships = table_rows(sections(md)["Where it ships"])
    assert [r[0] for r in ships] == ["90.01", "90.02", "90.03"]
    assert [r[2] for r in ships] == ["no", "yes", "yes"]
    assert "| NGC release | 90.01 | 90.02 |" in md
    # A local clone of a GitHub repository, whose origin URL carries a token: the report
    # links to GitHub from the remote, and the token appears nowhere.
    subprocess.run(["git", "-C", str(tmp_path / "pytorch"), "remote", "add", "origin",
                    "https://someone:SECRET-TOKEN@github.com/pytorch/pytorch.git"], check=True)
    code, out, _ = run_cli(["bisect", "--from", "90.01", "--to", "90.02", "--torch-repo",
                            str(tmp_path / "pytorch"), "--backend", "local", "--build", BUILD,
                            "--test", TEST + " # again", "--state", str(tmp_path / "st"),
                            "--cache-dir", str(tmp_path / "cache"), "--quiet", "--json"])
    res = json.loads(out)
    md = check_report(Path(res["report"]), tmp_path, res["probes"])
    assert (f"by [pytorch/pytorch@{shas[50][:12]}](https://github.com/pytorch/pytorch/commit/"
            f"{shas[50]}): change 50 (#1050)**") in md
    assert "[pull request](https://github.com/pytorch/pytorch/pull/1050)" in md
    assert "(#1050) (" not in md      # the PR number once, not twice
    for path in [Path(res["report"]), tmp_path / "st" / "state.db"]:
        assert b"SECRET-TOKEN" not in path.read_bytes()


@pytest.mark.parametrize("origin,slug", [
    ("https://github.com/pytorch/pytorch.git", "pytorch/pytorch"),
    ("https://github.com/NVIDIA/TransformerEngine", "NVIDIA/TransformerEngine"),
    ("git@github.com:pytorch/pytorch.git", "pytorch/pytorch"),
    ("/srv/mirrors/pytorch", None),
    ("https://gitlab.com/a/b.git", None),
])
def test_github_slug(origin, slug):
    assert github_slug(origin) == slug


def test_scrubber_replaces_this_machines_paths_only():
    from bisect_ngc.report.markdown import Scrubber
    scrub = Scrubber({"/tmp/some state": "$BISECT_NGC_STATE"})
    text = scrub("run /bin/sh -c x in /tmp/some state/logs, then /home/me/x.txt </script>")
    assert "/bin/sh" in text and "</script>" in text
    assert "$BISECT_NGC_STATE/logs" in text and "/home/me" not in text and "…/x.txt" in text
    # A path under a quoted variable is the recipe's own, not this machine's.
    recipe = 'pip install "$BISECT_ARTIFACTS"/pkg-*.whl "${HOME}"/x "/home/me/y"'
    assert scrub(recipe) == 'pip install "$BISECT_ARTIFACTS"/pkg-*.whl "${HOME}"/x "…/y"'
    cmd = scrub.command(["bisect-ngc", "probe", "--state", "/tmp/some state", "--test",
                         "echo '$(x)'"])
    out = subprocess.run(["bash", "-c", f"printf '%s\\n' {cmd}"], capture_output=True,
                         text=True, env={"BISECT_NGC_STATE": "/s t"}).stdout.splitlines()
    assert out == ["bisect-ngc", "probe", "--state", "/s t", "--test", "echo '$(x)'"]


def test_html_in_commit_titles_is_escaped(tmp_path, run_cli):
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for i, title in enumerate(["start", "one", "<img src=x onerror=alert(1)> & more", "two"]):
        (repo / "behaviour").write_text("new\n" if i >= 2 else "old\n")
        (repo / "n").write_text(str(i))
        subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", title], check=True)
    code, out, _ = bisect(run_cli, tmp_path, repo)
    assert code == 0
    md = Path(json.loads(out)["report"]).read_text()
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt; &amp; more" in md


def test_checkout_time_is_recorded_and_counted(tmp_path, run_cli):
    make_repo(tmp_path / "r", 40, 21)
    code, out, _ = bisect(run_cli, tmp_path, tmp_path / "r")
    res = json.loads(out)
    _, log, _ = run_cli(["log", "--state", tmp_path / "st", "--json"])
    rows = json.loads(log)
    assert code == 0 and rows and all(r["checkout_s"] and r["checkout_s"] > 0 for r in rows)
    md = Path(res["report"]).read_text()
    total = sum(r["checkout_s"] for r in rows if not r["verify"])   # the search's probes
    shown = f"{total * 1000:.0f} ms" if total < 1 else f"{total:.2f} s"
    assert f"summed over the probes, which overlap when several run at once: checkouts {shown}" \
        in md
    # No number shown as 0.0 next to its own product: the serial estimate multiplies what
    # it shows.
    serial = re.search(r"about (\d+) probes × (\d+) ms = (\d+) ms", md)
    assert serial is None or abs(int(serial[1]) * int(serial[2]) - int(serial[3])) <= int(serial[1])
    median = sorted(r["checkout_s"] + (r["build_s"] or 0) + (r["test_s"] or 0)
                    for r in rows)[len(rows) // 2]
    assert "median probe (checkout + build + test)" in md and median > 0
    assert "the links are relative to this report" in md


def test_the_question_is_one_list_without_blank_lines(tmp_path, run_cli):
    make_repo(tmp_path / "r", 12, 5)
    code, out, _ = bisect(run_cli, tmp_path, tmp_path / "r")
    md = Path(json.loads(out)["report"]).read_text()
    question = md.split("## The question")[1].split("- Test:")[0]
    items = question[question.index("- Repository"):].rstrip("\n")
    assert "\n\n" not in items, items


def test_every_evidence_line_names_its_environment(tmp_path, run_cli):
    make_repo(tmp_path / "r", 12, 5)
    code, out, _ = bisect(run_cli, tmp_path, tmp_path / "r")
    md = Path(json.loads(out)["report"]).read_text()
    evidence = md.split("## Evidence")[1].split("## Probes")[0]
    assert evidence.count("- environment: the commit's build on this host") == 2
