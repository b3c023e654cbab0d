"""Two images for the component tests, built from the test image to NGC's layout (pip's
/usr/local/lib/python3.X/dist-packages, a library in /usr/local/lib, variables in the image
config) that differ in 10 components."""
from __future__ import annotations

from pathlib import Path

from tests.lib.companion_repos import wheel as make_wheel
from tests.lib.docker_engine import IMAGE, commit_image



PACKAGES = ("alpha", "beta", "gamma", "delta", "epsilon")


LIB_C = "int bisect_demo(void) { return %d; }\n"


NCCL_C = "int ncclMinor(void) { return %d; }\n"      # NCCL_VERSION in the config moves too


def wheel(out: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel of text files (tests.lib.companion_repos.wheel)."""
    return make_wheel(out, name, version, {k: v.encode() for k, v in files.items()},
                      purelib=True)


def build_image(side: str, tmp: Path) -> None:
    """bisect-ngc-test/components:SIDE."""
    wheels = tmp / f"wheels-{side}"
    wheels.mkdir()
    version = "1.0" if side == "a" else "2.0"
    for name in PACKAGES:
        wheel(wheels, name, version, {f"{name}/__init__.py": f"behaviour = {side!r}\n"})
    commit = "aaaaaaaaaa" if side == "a" else "bbbbbbbbbb"
    wheel(wheels, "torch", f"2.5.0a0+{commit}", {
        "torch/__init__.py": f"behaviour = {side!r}\n",
        "torch/version.py": f"git_version = {commit!r}\n"})
    if side == "a":
        wheel(wheels, "zeta", "1.0", {"zeta/__init__.py": "x = 1\n"})
    minor = 0 if side == "a" else 1
    (wheels / "demo.c").write_text(LIB_C % (41 if side == "a" else 42))
    (wheels / "nccl.c").write_text(NCCL_C % (21 if side == "a" else 23))
    nccl = "2.21.5" if side == "a" else "2.23.4"
    script = ("set -e; pip install -q --no-deps --no-index --break-system-packages /w/*.whl; "
              f"gcc -shared -fPIC -Wl,-soname,libbisectdemo.so.1 -o "
              f"/usr/local/lib/libbisectdemo.so.1.{minor} /w/demo.c; "
              f"ln -sf libbisectdemo.so.1.{minor} /usr/local/lib/libbisectdemo.so.1; "
              f"gcc -shared -fPIC -Wl,-soname,libnccl.so.2 -o /usr/local/lib/libnccl.so.{nccl} "
              f"/w/nccl.c; ln -sf libnccl.so.{nccl} /usr/local/lib/libnccl.so.2; ldconfig")
    commit_image(IMAGE, script, "bisect-ngc-test/components", side,
                 volumes=[f"{wheels}:/w:ro"],
                 changes=[f"ENV DEMO_MODE={'old' if side == 'a' else 'new'}",
                          f"ENV DEMO_THREADS={'4' if side == 'a' else '8'}",
                          f"ENV NCCL_VERSION={nccl}"])
