"""The Python scripts that component attribution runs inside an image: the inventory
(distributions with their files, libraries, the Python version) and the extraction of
named units' files. Each runs as `python3 -c SCRIPT` and prints one JSON line."""

INVENTORY_SCRIPT = r'''
import glob, hashlib, json, os, re, sys
from importlib import metadata
out = {"python": "%d.%d" % sys.version_info[:2], "dists": {}, "libs": {}}
for dist in metadata.distributions():
    name = dist.metadata["Name"] or ""
    key = re.sub(r"[-_.]+", "-", name).lower()
    if not key or key in out["dists"]:
        continue
    record = dist.read_text("RECORD") or dist.read_text("installed-files.txt") or ""
    base = str(dist.locate_file(""))
    files = [str(f) for f in (dist.files or [])]
    out["dists"][key] = {"name": name, "version": dist.version, "base": base,
                         "files": files, "digest": hashlib.sha256(record.encode()).hexdigest()}
dirs = sorted(glob.glob("/usr/local/cuda*/lib64")) + ["/usr/lib/x86_64-linux-gnu",
                                                       "/usr/local/lib"]
for d in dirs:
    for path in sorted(glob.glob(os.path.join(d, "lib*.so*"))):
        stem = os.path.basename(path).split(".so")[0]
        if stem in out["libs"] and out["libs"][stem]["dir"] != d:
            continue
        real = os.path.realpath(path)
        lib = out["libs"].setdefault(stem, {"dir": d, "files": [], "real": "", "size": 0})
        lib["files"].append(os.path.basename(path))
        if os.path.isfile(real) and os.path.getsize(real) >= lib["size"]:
            lib["real"], lib["size"] = os.path.basename(real), os.path.getsize(real)
print(json.dumps(out))
'''

# Copies the named units' files into /extract/UNIT/..., keeping paths below their base.
EXTRACT_SCRIPT = r'''
import json, os, shutil, sys
units = json.loads(sys.argv[1])
for unit, (base, files) in units.items():
    dest = os.path.join("/extract", unit)
    for rel in files:
        src = os.path.normpath(os.path.join(base, rel))
        if not os.path.isfile(src) and not os.path.islink(src):
            continue
        target = os.path.normpath(os.path.join(dest, rel))
        if not target.startswith(dest + os.sep):
            continue          # a RECORD path outside its base (../../bin/x): not importable
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=True)
    os.makedirs(dest, exist_ok=True)
'''
