"""Compile each file of an Ansible module payload once per content, not on every module run.

Test hosts only, never installed by a role: a .pth file in the Molecule base images (scripts/build-base-image.sh)
installs it in every Python there, and the test harness's sitecustomize.py beside this file (on PYTHONPATH of the
playbooks the unit stage runs, tests/support/ansible_harness.py) in the modules those playbooks run on this machine.
Ansible ships every module run as a zip (``ansible_<module>_payload.zip``) that Python imports with zipimport,
which compiles each ``.py`` from source on every import because the zip holds no bytecode. Measured in the
Debian 12 image (issue 36): one ``stat`` run costs about 200 ms of CPU, most of it compiling
``ansible.module_utils.basic`` and what it imports, against 14 ms for ``python3 -c pass``. A Molecule run makes
thousands of module runs, so the test hosts spent most of their CPU compiling the same files again.

This does what CPython's ``__pycache__`` does for files on disk: the code object of a payload file is kept,
keyed by the interpreter's version, the file's path inside the payload and a SHA-256 of its
source, so any change of the source or the interpreter compiles anew. Nothing else changes: the module's code
runs as shipped, and ``co_filename`` is set to this run's payload path, so tracebacks name the real file.
A cache that cannot be read or written (another user, a full disk) falls back to compiling, as before; one that
others could have written (not owned by this user, or writable by group or others) is not read at all, since
loading a code object runs whatever it holds.
GPUFLEET_ANSIBALLZ_CODE_CACHE names the directory (default /var/cache/gpufleet-ansiballz-code).
"""

import marshal
import os
import stat
import sys
import zipimport

CACHE_DIR = os.environ.get("GPUFLEET_ANSIBALLZ_CODE_CACHE") or "/var/cache/gpufleet-ansiballz-code"
_PAYLOAD_MARK = "_payload.zip" + os.sep
_compile_uncached = getattr(zipimport, "_compile_source", None)
_CODE_TYPE = type(compile("", "", "exec"))


def _with_filename(code, filename):
    consts = tuple(_with_filename(const, filename) if isinstance(const, _CODE_TYPE) else const for const in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cache_path(inner_path, source):
    import hashlib  # here, not at start-up: every Python process on the image loads this file

    key = (sys.version + "\0" + inner_path + "\0").encode("utf-8", "surrogateescape") + source
    return os.path.join(CACHE_DIR, hashlib.sha256(key).hexdigest())


def _store(path, code):
    temporary = "%s.%d.tmp" % (path, os.getpid())
    try:
        os.makedirs(CACHE_DIR, mode=0o700, exist_ok=True)
        if not _cache_is_trusted():
            return
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
            marshal.dump(code, handle)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _cache_is_trusted():
    try:
        found = os.stat(CACHE_DIR)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid() and not found.st_mode & 0o022


def compile_source(pathname, source):
    """zipimport's _compile_source, with the result kept for Ansible payload files."""
    if _PAYLOAD_MARK not in pathname:
        return _compile_uncached(pathname, source)
    path = _cache_path(pathname.split(_PAYLOAD_MARK, 1)[1], source)
    code = None
    if _cache_is_trusted():
        try:
            with open(path, "rb") as handle:
                code = marshal.load(handle)
        except (OSError, EOFError, ValueError, TypeError):
            pass
    if not isinstance(code, _CODE_TYPE):
        code = _compile_uncached(pathname, source)
        _store(path, code)
        return code
    return _with_filename(code, pathname)


def install():
    """Called at every interpreter start-up, by the .pth file or sitecustomize.py. A Python without the private
    zipimport._compile_source (CPython 3.11 to 3.13 have it) keeps compiling as before."""
    if _compile_uncached is not None:
        zipimport._compile_source = compile_source
