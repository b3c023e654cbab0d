"""What a build or test command reads from this host, for the cache keys.

A cached verdict may only answer for the same build and test. Their text is not enough:
`pytest -q /work/t.py` runs a file whose edits the text does not show, and `$LIMIT` is a
value the text does not hold. So a key also holds:

- **files**: every word of the command that names an existing regular file on this host
  by an absolute path (`/work/t.py`, `~/t.sh`, `$HOME/t.sh`, `--config=/work/c.yaml`),
  whatever runs it, by its content; relative words after `cd /abs` (or `--chdir`), the
  makefiles of `make -C /abs`, the files of a directory given to pytest; the Python
  files beside a keyed one (what it imports); and, in a shell script so keyed (or a
  `sh -c '...'` string), the same again, a few levels deep: the files it runs or sources,
  `. "$(dirname "$0")/env.sh"` and `$SCRIPT_DIR/x` included. Left out: what the command
  writes (the targets of `>` and `>>`, of `tee`, and of output options such as `-o`,
  `--log`, `--junitxml`), system directories (/usr, /etc, /proc, ...: what the host's
  packages hold, not the user's edits), and relative paths outside a `cd` (the commit's
  own files, which the commit keys).
- **variables**, where the command runs on this host (in a container the host's
  environment does not reach it): every `$NAME` or `${NAME}` that the command or a keyed
  shell script names, and the toolchain's (TOOLCHAIN: the compiler, its flags, the active
  virtualenv or conda environment), by their values here; and those of --key-env always.
  Left out: the tool's own BISECT_*, the shell's bookkeeping, and what a scheduler or a
  terminal sets per job (SLURM_*, CUDA_VISIBLE_DEVICES, TERM, ...). A program that reads a
  variable without naming it in the command (Python's os.environ) needs --key-env.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
from pathlib import Path
from typing import Any, Iterable

_SYSTEM = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/etc/",
           "/proc/", "/sys/", "/dev/", "/run/", "/boot/", "/var/lib/")
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", ";;", "|&"}
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_NOT_KEYED = {"PWD", "OLDPWD", "RANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "SHLVL",
              "SRANDOM", "EPOCHSECONDS", "EPOCHREALTIME", "BASH_COMMAND", "FUNCNAME", "IFS",
              "REPLY", "OPTARG", "OPTIND", "PIPESTATUS", "BASH_SOURCE", "BASH_LINENO",
              "HISTCMD", "HOSTNAME", "TERM", "COLUMNS", "LINES", "DISPLAY", "WINDOWID",
              "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "DBUS_SESSION_BUS_ADDRESS",
              "XDG_RUNTIME_DIR", "XDG_SESSION_ID", "_"}
_PER_JOB = ("BISECT_", "SLURM_", "SLURMD_", "PBS_", "LSB_", "SGE_", "FLUX_", "OMPI_", "PMI_",
            "PMIX_", "SSH_", "TMUX", "STY", "KITTY_", "VSCODE_", "TERM_")
TOOLCHAIN = ("CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "VIRTUAL_ENV",
             "CONDA_PREFIX", "PYTHONPATH")
# Options whose value is a file the command writes.
_WRITES = {"-o", "--output", "--out", "--outfile", "--output-file", "--log", "--log-file",
           "--logfile", "--junitxml", "--junit-xml", "--json-report-file", "--report-log",
           "--result-log", "--html", "--xml", "--save", "--dump"}
_CHDIR = {"--chdir", "--workdir", "--directory"}
_DEPTH = 4               # shell scripts keyed inside keyed shell scripts, at most this deep
_SCRIPT_BYTES = 1 << 20  # a "script" larger than this is data: its words are not read
_DIR_FILES = 2000        # a directory (given to pytest) with more files is keyed by none


def host_inputs(command: str | None, *, environment: bool, key_env: Iterable[str] = ()
                ) -> dict[str, Any]:
    """The files (path -> sha256) and, with `environment`, the variables (name -> value
    or None) that `command` reads from this host; {} when it reads none, so that a key
    without them stays what it was."""
    if not command:
        return {}
    files: dict[str, str] = {}
    names: set[str] = set()
    _scan(command, None, {}, files, names, 0)
    out: dict[str, Any] = {}
    if files:
        out["files"] = files
    wanted = set(key_env)
    if environment:
        wanted |= names | {n for n in TOOLCHAIN if os.environ.get(n)}
    if wanted:
        out["env"] = {n: os.environ.get(n) for n in sorted(wanted)}
    return out


def _scan(text: str, script: str | None, local: dict[str, str], files: dict[str, str],
          names: set[str], depth: int) -> None:
    """Add the files and variables `text` names. `script`: the file `text` is, whose
    directory `$(dirname "$0")` means; `local`: directories its assignments named."""
    if script is not None:
        text = _own_dir(_uncommented(text), str(Path(script).parent))
        local = {**local, **_assigned(text, local)}
    names.update(n for n in _VARIABLE.findall(text)
                 if n not in _NOT_KEYED and n not in local and not n.startswith(_PER_JOB))
    for path, shell in _paths(_words(text), script, local):
        if path in files:
            continue
        files[path] = _content(Path(path))
        if path.endswith(".py"):
            _add_beside(Path(path), files)
        if depth < _DEPTH and (shell or _is_shell(Path(path))):
            try:
                body = Path(path).read_bytes()[:_SCRIPT_BYTES].decode(errors="replace")
            except OSError:
                continue
            _scan(body, path, local, files, names, depth + 1)
    for word in _words(text):               # `sh -c '...'`: a command inside a word
        if depth < _DEPTH and any(c.isspace() for c in word):
            _scan(word, None, local, files, names, depth + 1)


def _uncommented(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _own_dir(text: str, here: str) -> str:
    """A script's idioms for its own directory, as that directory."""
    quoted = shlex.quote(here)
    for idiom in (r'\$\(\s*cd\s+"?\$\(\s*dirname\s+"?(\$0|\$\{BASH_SOURCE(\[0\])?\})"?\s*\)"?'
                  r'\s*(&&|;)\s*pwd(\s+-P)?\s*\)',
                  r'\$\(\s*dirname\s+"?(\$0|\$\{BASH_SOURCE(\[0\])?\}|\$BASH_SOURCE)"?\s*\)',
                  r'\$\{(0|BASH_SOURCE(\[0\])?)%/\*\}'):
        text = re.sub(idiom, lambda m: quoted, text)
    return text


def _assigned(text: str, local: dict[str, str]) -> dict[str, str]:
    """`NAME=/abs/dir` assignments in a script (after _own_dir), as directories."""
    found: dict[str, str] = {}
    for name, value in re.findall(r"^\s*(?:export\s+|readonly\s+|local\s+)?"
                                  r"([A-Za-z_][A-Za-z0-9_]*)=(\S+)\s*$", text, re.M):
        words = _words(value)
        path = _expand(words[0], {**local, **found}) if len(words) == 1 else ""
        if path.startswith("/") and os.path.isdir(path):
            found[name] = os.path.normpath(path)
    return found


def _words(text: str) -> list[str]:
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return list(lexer)
    except ValueError:                  # an unbalanced quote: plain words will do
        return text.split()


def _paths(words: list[str], script: str | None, local: dict[str, str]
           ) -> list[tuple[str, bool]]:
    """The host files the words name, each with whether it is sourced (a shell script)."""
    found: list[tuple[str, bool]] = []
    cwd: str | None = None            # after `cd /abs`, relative words are /abs's files
    first, after, tee, pytest = True, "", False, False
    for word in words:
        if word in _SEPARATORS:
            first, after, tee, pytest = True, "", False, False
            continue
        if set(word) <= set("<>&|") and ("<" in word or ">" in word):
            after = "write" if ">" in word else ""
            continue
        command, first, role = first, False, after
        name = os.path.basename(word)
        if command:
            tee = name == "tee"
        pytest = pytest or name in ("pytest", "py.test") or word == "pytest"
        flag, _, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        after = ("cd" if command and word in ("cd", "pushd") else
                 "source" if command and word in (".", "source") else
                 "-C" if word == "-C" else "cd" if flag in _CHDIR and not attached else
                 "write" if flag in _WRITES and not attached else "")
        if word.startswith("-C") and len(word) > 2:
            role, word = "-C", word[2:]
        elif flag in _WRITES and attached or tee and not command and not word.startswith("-"):
            continue                  # a file the command writes
        elif flag in _CHDIR and attached:
            role, word = "cd", attached
        if role == "write" or after:
            continue
        for value in _candidates(word):
            path = _host_path(value, cwd, script if role == "source" else None, local)
            if path is None:
                continue
            if role == "cd":
                cwd = path if os.path.isdir(path) else cwd
            elif role == "-C" and os.path.isdir(path):
                found += [(os.path.join(path, m), False) for m in
                          ("GNUmakefile", "makefile", "Makefile")
                          if os.path.isfile(os.path.join(path, m))]
            elif pytest and os.path.isdir(path) and not path.startswith(_SYSTEM):
                found += [(p, False) for p in _directory(path)]
            elif os.path.isfile(path) and not path.startswith(_SYSTEM):
                found.append((path, role == "source"))
    return found


def _candidates(word: str) -> list[str]:
    """The word, and what follows its first `=` (`--config=/x`, `VAR=/x`)."""
    values = [word]
    if "=" in word:
        values.append(word.split("=", 1)[1])
    return values


def _expand(word: str, local: dict[str, str]) -> str:
    """~ and $VAR, a script's own directory variables first."""
    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return local.get(name, os.environ.get(name, m.group(0)))
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", value,
                  os.path.expanduser(word))


def _host_path(word: str, cwd: str | None, script: str | None, local: dict[str, str]
               ) -> str | None:
    """An absolute path for a word, where it names one: `/x`, `~/x`, `$VAR/x`; a relative
    word only after `cd /abs`, or sourced by a script (`. ./env.sh`: the script's
    directory, as people write it next to the script)."""
    value = _expand(word, local)
    if value.startswith("/"):
        return os.path.normpath(value)
    if not value or value.startswith(("-", "$")):
        return None
    base = cwd or (str(Path(script).parent) if script else None)
    return os.path.normpath(os.path.join(base, value)) if base else None


def _directory(path: str) -> list[str]:
    """A test directory's files (bounded; caches and git's own left out)."""
    found: list[str] = []
    for top, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__", ".pytest_cache",
                                                       ".mypy_cache", "node_modules"))
        found += [os.path.join(top, f) for f in sorted(files) if not f.endswith(".pyc")]
        if len(found) > _DIR_FILES:
            return []
    return found


def _add_beside(path: Path, files: dict[str, str]) -> None:
    """The Python files beside a keyed one: the modules it imports, most often."""
    try:
        beside = sorted(p for p in path.parent.glob("*.py") if p.is_file())
    except OSError:
        return
    if len(beside) <= _DIR_FILES and not str(path.parent).startswith(_SYSTEM):
        for p in beside:
            files.setdefault(str(p), _content(p))


def _is_shell(path: Path) -> bool:
    if path.suffix in (".sh", ".bash", ".zsh", ".ksh"):
        return True
    try:
        with open(path, "rb") as f:
            head = f.readline(200)
    except OSError:
        return False
    return head.startswith(b"#!") and re.search(rb"\b(ba|z|k|da)?sh\b", head) is not None


def _content(path: Path) -> str:
    """A file's sha256; past 64 MiB (a data set, not a script), its size and mtime."""
    try:
        stat = path.stat()
    except OSError:
        return "unreadable"
    try:
        if stat.st_size <= 64 << 20:
            return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:           # unreadable here: its size and date still tell an edit
        pass
    return f"size={stat.st_size},mtime={stat.st_mtime_ns}"
