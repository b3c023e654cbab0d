"""What a build or test command reads from this host, for the cache keys.

A cached verdict may only answer for the same build and test. Their text is not enough:
`pytest -q /work/t.py` runs a file whose edits the text does not show, and `$LIMIT` is a
value the text does not hold. So a key also holds:

- **files**: every word of the command that names an existing regular file on this host
  by an absolute path (`/work/t.py`, `~/t.sh`, `$HOME/t.sh`, `--config=/work/c.yaml`),
  whatever runs it, by its content; relative words after `cd /abs` and the makefiles of
  `make -C /abs`; and, in a shell script so keyed, the same again (the files it runs or
  sources, `. ./env.sh` included), a few levels deep. Left out: the targets of `>` and
  `>>` (a log or a counter the test writes), system directories (/usr, /etc, /proc, ...:
  what the host's packages hold, not the user's edits), and relative paths outside a
  `cd` (the commit's own files, which the commit keys).
- **variables**: every `$NAME` or `${NAME}` that the command or a keyed shell script
  names, by its value here, where the command runs on this host (in a container the
  host's environment does not reach it), and those `--key-env` names; the tool's own
  BISECT_* and the shell's bookkeeping are left out. A program that reads a variable
  without naming it in the command (Python's os.environ) needs --key-env.
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
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "\n", ";;", "|&"}
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_NOT_KEYED = {"PWD", "OLDPWD", "RANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "SHLVL",
              "SRANDOM", "EPOCHSECONDS", "EPOCHREALTIME", "BASH_COMMAND", "FUNCNAME", "IFS",
              "REPLY", "OPTARG", "OPTIND", "PIPESTATUS", "BASH_SOURCE", "BASH_LINENO",
              "HISTCMD", "_"}
_DEPTH = 4               # shell scripts keyed inside keyed shell scripts, at most this deep
_SCRIPT_BYTES = 1 << 20  # a "script" larger than this is data: its words are not read


def host_inputs(command: str | None, *, environment: bool, key_env: Iterable[str] = ()
                ) -> dict[str, Any]:
    """The files (path -> sha256) and, with `environment`, the variables (name -> value
    or None) that `command` reads from this host; {} when it reads none, so that a key
    without them stays what it was."""
    if not command:
        return {}
    files: dict[str, str] = {}
    names: set[str] = set()
    _scan(command, None, files, names, 0)
    out: dict[str, Any] = {}
    if files:
        out["files"] = files
    wanted = (names | set(key_env)) if environment else set(key_env)
    if wanted:
        out["env"] = {n: os.environ.get(n) for n in sorted(wanted)}
    return out


def _scan(text: str, here: str | None, files: dict[str, str], names: set[str],
          depth: int) -> None:
    """Add the files and variables `text` names; `here` is a script's directory."""
    names.update(n for n in _VARIABLE.findall(text)
                 if n not in _NOT_KEYED and not n.startswith("BISECT_"))
    for path, sourced in _paths(_words(text), here):
        if path in files:
            continue
        files[path] = _content(Path(path))
        if depth < _DEPTH and (sourced or _is_shell(Path(path))):
            try:
                body = Path(path).read_bytes()[:_SCRIPT_BYTES].decode(errors="replace")
            except OSError:
                continue
            _scan(body, str(Path(path).parent), files, names, depth + 1)


def _words(text: str) -> list[str]:
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return list(lexer)
    except ValueError:                  # an unbalanced quote: plain words will do
        return text.split()


def _paths(words: list[str], here: str | None) -> list[tuple[str, bool]]:
    """The host files the words name, each with whether it is sourced."""
    found: list[tuple[str, bool]] = []
    cwd: str | None = None            # after `cd /abs`, relative words are /abs's files
    first, after = True, ""
    for word in words:
        if word in _SEPARATORS:
            first, after = True, ""
            continue
        if set(word) <= set("<>&|") and ("<" in word or ">" in word):
            after = "write" if ">" in word else ""
            continue
        command, first, role = first, False, after
        after = "cd" if command and word in ("cd", "pushd") else \
            "source" if command and word in (".", "source") else "-C" if word == "-C" else ""
        if role == "write" or after:
            continue                  # a file the command writes; or a word that says how
        for value in _candidates(word):
            path = _host_path(value, cwd, here if role == "source" else None)
            if path is None:
                continue
            if role == "cd":
                cwd = path if os.path.isdir(path) else cwd
            elif role == "-C" and os.path.isdir(path):
                found += [(os.path.join(path, m), False) for m in
                          ("GNUmakefile", "makefile", "Makefile")
                          if os.path.isfile(os.path.join(path, m))]
            elif os.path.isfile(path) and not path.startswith(_SYSTEM):
                found.append((path, role == "source"))
    return found


def _candidates(word: str) -> list[str]:
    """The word, and what follows its first `=` (`--config=/x`, `VAR=/x`)."""
    values = [word]
    if "=" in word:
        values.append(word.split("=", 1)[1])
    return values


def _host_path(word: str, cwd: str | None, here: str | None) -> str | None:
    """An absolute path for a word, where it names one: `/x`, `~/x`, `$VAR/x`; a relative
    word only after `cd /abs`, or sourced by a script (`. ./env.sh`: the script's
    directory, as people write it next to the script)."""
    value = os.path.expandvars(os.path.expanduser(word))
    if value.startswith("/"):
        return os.path.normpath(value)
    if not value or value.startswith(("-", "$")):
        return None
    base = cwd or here
    return os.path.normpath(os.path.join(base, value)) if base else None


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
    stat = path.stat()
    try:
        if stat.st_size <= 64 << 20:
            return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:           # unreadable here: its size and date still tell an edit
        pass
    return f"size={stat.st_size},mtime={stat.st_mtime_ns}"
