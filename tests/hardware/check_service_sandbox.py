"""Does a CUDA workload run inside the system-call sandbox of the SGLang unit? (GPU host, read-only)

The GPU test host has no systemd as PID 1, so the unit itself cannot run there. This script
reproduces the parts of the unit's sandbox that are enforced by seccomp, with the same semantics
systemd gives them, and runs a PyTorch workload under it that exercises what SGLang's start uses:
CUDA initialisation, a bf16 matrix product, NCCL (one rank, TCP rendezvous on loopback), CUDA IPC
of a tensor to a spawned child (with and without expandable segments, whose IPC path calls
pidfd_getfd) and torch.compile (Triton JIT, which runs a C compiler). It is not SGLang itself: no
registry is reachable from that host and SGLang's wheels are too big to carry (docs/service-hardening.md).

Reproduced from roles/sglang_service/templates/sglang.service.j2 (systemd's semantics from
systemd.exec(5) and src/shared/seccomp-util.c):
- SystemCallFilter=~<groups> with SystemCallErrorNumber=EPERM: the groups' syscalls fail with EPERM.
  The groups' members are passed in (--deny NAME=NR ...) as `systemd-analyze syscall-filter` of the
  controller lists them, numbered from its x86_64 unistd_64.h (see run_service_sandbox.sh).
- SystemCallArchitectures=native: a non-native architecture is killed; x32 syscall numbers get ENOSYS.
- RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK: socket() of another family fails
  with EAFNOSUPPORT.
- RestrictNamespaces=yes: clone()/unshare() with a CLONE_NEW* flag and setns() fail with EPERM,
  clone3() with ENOSYS (systemd cannot look into clone3's struct, so glibc falls back to clone).
- RestrictRealtime=yes: sched_setscheduler() to SCHED_FIFO/RR/DEADLINE fails with EPERM.
- NoNewPrivileges=yes (prctl), UMask=0077, and an unprivileged user (nobody) when run as root.
Not reproduced: the mount namespace settings (ProtectSystem, PrivateTmp, ...), which need systemd;
DevicePolicy=closed is checked statically: every /dev/nvidia* node's major number must belong to
one of the unit's DeviceAllow= classes (/proc/devices).

Controls prove the filter is in force: adjtimex(modes=0), which any user may call, must fail with
EPERM; socket(AF_ALG) with EAFNOSUPPORT; unshare(CLONE_NEWUSER) with EPERM; clone3 with ENOSYS.
Prints one line per check and exits 1 if any fails.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import pwd
import re
import stat
import struct
import sys
import tempfile

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
RET_KILL_PROCESS = 0x80000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_JSET_K = 0x45
BPF_RET_K = 0x06
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
# x86_64 numbers (unistd_64.h) of the calls the filter inspects by argument.
NR_SOCKET, NR_CLONE, NR_UNSHARE, NR_SETNS, NR_CLONE3 = 41, 56, 272, 308, 435
NR_SCHED_SETSCHEDULER, NR_ADJTIMEX = 144, 159
CLONE_NEW_FLAGS = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
ALLOWED_FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
ALLOWED_SCHED_POLICIES = (0, 3, 5)  # SCHED_OTHER, SCHED_BATCH, SCHED_IDLE
OFFSET_NR, OFFSET_ARCH = 0, 4


def offset_arg(index: int) -> int:
    return 16 + 8 * index  # low 32 bits of args[index] (little endian)


def build_filter(denied: dict[str, int]) -> list[tuple[int, int, int, int]]:
    prog = [
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
        (BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        (BPF_RET_K, 0, 0, RET_KILL_PROCESS),
        (BPF_LD_W_ABS, 0, 0, OFFSET_NR),
        (BPF_JGE_K, 0, 1, X32_SYSCALL_BIT),
        (BPF_RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),
        (BPF_JEQ_K, 0, 1, NR_CLONE3),
        (BPF_RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),
        (BPF_JEQ_K, 0, 1, NR_SETNS),
        (BPF_RET_K, 0, 0, RET_ERRNO | errno.EPERM),
    ]
    for number in sorted(set(denied.values())):
        prog += [(BPF_JEQ_K, 0, 1, number), (BPF_RET_K, 0, 0, RET_ERRNO | errno.EPERM)]
    # clone(flags, ...) and unshare(flags): refuse any namespace flag.
    for number in (NR_CLONE, NR_UNSHARE):
        prog += [
            (BPF_JEQ_K, 0, 4, number),
            (BPF_LD_W_ABS, 0, 0, offset_arg(0)),
            (BPF_JSET_K, 0, 1, CLONE_NEW_FLAGS),
            (BPF_RET_K, 0, 0, RET_ERRNO | errno.EPERM),
            (BPF_RET_K, 0, 0, RET_ALLOW),
        ]
    # socket(family, ...): only the unit's address families.
    prog.append((BPF_JEQ_K, 0, len(ALLOWED_FAMILIES) + 3, NR_SOCKET))
    prog.append((BPF_LD_W_ABS, 0, 0, offset_arg(0)))
    for position, family in enumerate(ALLOWED_FAMILIES):
        prog.append((BPF_JEQ_K, len(ALLOWED_FAMILIES) - position, 0, family))
    prog += [(BPF_RET_K, 0, 0, RET_ERRNO | errno.EAFNOSUPPORT), (BPF_RET_K, 0, 0, RET_ALLOW)]
    # sched_setscheduler(pid, policy, ...): no realtime policy.
    prog.append((BPF_JEQ_K, 0, len(ALLOWED_SCHED_POLICIES) + 3, NR_SCHED_SETSCHEDULER))
    prog.append((BPF_LD_W_ABS, 0, 0, offset_arg(1)))
    for position, policy in enumerate(ALLOWED_SCHED_POLICIES):
        prog.append((BPF_JEQ_K, len(ALLOWED_SCHED_POLICIES) - position, 0, policy))
    prog += [(BPF_RET_K, 0, 0, RET_ERRNO | errno.EPERM), (BPF_RET_K, 0, 0, RET_ALLOW)]
    prog.append((BPF_RET_K, 0, 0, RET_ALLOW))
    return prog


def install_filter(prog: list[tuple[int, int, int, int]]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    raw = b"".join(struct.pack("HBBI", *instruction) for instruction in prog)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(buffer))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def raw_syscall(number: int, *args: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    return 0 if result >= 0 else ctypes.get_errno()


def check(results: list[dict], name: str, ok: bool, detail: str) -> None:
    results.append({"check": name, "ok": bool(ok), "detail": detail})
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def controls(results: list[dict]) -> None:
    timex = ctypes.create_string_buffer(256)  # struct timex, modes = 0: a read-only query
    got = raw_syscall(NR_ADJTIMEX, ctypes.addressof(timex))
    check(results, "control adjtimex (@clock)", got == errno.EPERM, f"errno {got} (want EPERM {errno.EPERM})")
    got = raw_syscall(NR_SOCKET, 38, 5, 0)  # AF_ALG, SOCK_SEQPACKET
    check(results, "control socket(AF_ALG)", got == errno.EAFNOSUPPORT, f"errno {got} (want EAFNOSUPPORT)")
    got = raw_syscall(NR_UNSHARE, 0x10000000)
    check(results, "control unshare(CLONE_NEWUSER)", got == errno.EPERM, f"errno {got} (want EPERM)")
    got = raw_syscall(NR_CLONE3, 0, 0)
    check(results, "control clone3", got == errno.ENOSYS, f"errno {got} (want ENOSYS)")


def ipc_child(queue, done) -> None:
    tensor = queue.get()
    tensor.add_(1)
    import torch  # noqa: PLC0415 (the child's own CUDA context)

    torch.cuda.synchronize()
    done.put(float(tensor.sum().item()))


def workload(results: list[dict]) -> None:
    import torch  # noqa: PLC0415 (imported under the filter on purpose)
    import torch.distributed as dist  # noqa: PLC0415
    import torch.multiprocessing as mp  # noqa: PLC0415

    try:
        name = torch.cuda.get_device_name(0)
        a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
        value = float((a @ a).float().abs().mean().item())
        check(results, "CUDA init and bf16 matmul", value > 0, f"{name}, mean |a@a| = {value:.2f}")
    except Exception as error:  # noqa: BLE001 (reported as the failed check)
        check(results, "CUDA init and bf16 matmul", False, repr(error))
        return
    try:
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29517", rank=0, world_size=1)
        t = torch.ones(1024, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        check(results, "NCCL init and all_reduce (1 rank)", float(t[0].item()) == 1.0, f"sum {t[0].item()}")
        dist.destroy_process_group()
    except Exception as error:  # noqa: BLE001
        check(results, "NCCL init and all_reduce (1 rank)", False, repr(error))
    try:
        ctx = mp.get_context("spawn")
        queue, done = ctx.Queue(), ctx.Queue()
        child = ctx.Process(target=ipc_child, args=(queue, done))
        child.start()
        shared = torch.zeros(4096, device="cuda")
        queue.put(shared)
        total = done.get(timeout=120)
        child.join(timeout=60)
        torch.cuda.synchronize()
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default allocator")
        check(results, f"CUDA IPC to a spawned child ({conf})", total == 4096.0 and float(shared.sum().item()) == 4096.0,
              f"child saw {total}, parent sees {float(shared.sum().item())}, child exit {child.exitcode}")
    except Exception as error:  # noqa: BLE001
        check(results, "CUDA IPC to a spawned child", False, repr(error))
    try:
        compiled = torch.compile(lambda x: torch.nn.functional.gelu(x) * 2 + 1)
        x = torch.randn(8192, device="cuda")
        got = compiled(x)
        want = torch.nn.functional.gelu(x) * 2 + 1
        check(results, "torch.compile (Triton JIT)", bool(torch.allclose(got, want, atol=1e-5)),
              f"max diff {float((got - want).abs().max().item()):.2e}")
    except Exception as error:  # noqa: BLE001
        check(results, "torch.compile (Triton JIT)", False, repr(error)[:400])


def device_classes(results: list[dict], allowed: list[str]) -> None:
    majors: dict[int, set[str]] = {}
    section = None
    with open("/proc/devices", encoding="ascii") as devices:
        for line in devices:
            if line.startswith("Character"):
                section = "char"
            elif line.startswith("Block"):
                section = "block"
            elif section == "char" and re.match(r"\s*\d+ ", line):
                number, name = line.split(None, 1)
                majors.setdefault(int(number), set()).add(name.strip())
    nodes = sorted(p for p in os.listdir("/dev") if p.startswith("nvidia"))
    nodes += sorted(f"nvidia-caps/{p}" for p in (os.listdir("/dev/nvidia-caps") if os.path.isdir("/dev/nvidia-caps") else []))
    seen = []
    for node in nodes:
        info = os.stat(f"/dev/{node}")
        if not stat.S_ISCHR(info.st_mode):
            continue
        # systemd resolves DeviceAllow=char-NAME through /proc/devices and allows that whole major.
        names = majors.get(os.major(info.st_rdev), set())
        seen.append(node)
        check(results, f"DeviceAllow covers /dev/{node}", bool(names & set(allowed)),
              f"major {os.major(info.st_rdev)} is {sorted(names) or 'not in /proc/devices'}")
    if not seen:
        check(results, "NVIDIA device nodes", False, "no /dev/nvidia* character device found")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deny", action="append", default=[], metavar="NAME=NR")
    parser.add_argument("--device-class", action="append", default=[])
    parser.add_argument("--results", required=True)
    parser.add_argument("--user", default="nobody")
    parser.add_argument("--no-filter", action="store_true", help="baseline: the same workload without the filter")
    args = parser.parse_args()
    denied = {}
    for item in args.deny:
        name, _separator, number = item.partition("=")
        denied[name] = int(number)
    results: list[dict] = []
    inherited = os.environ.pop("SANDBOX_CHECK_REPORT_FD", None)
    if inherited is not None:
        report = os.fdopen(int(inherited), "w", encoding="utf-8")
    else:
        report = open(args.results, "w", encoding="utf-8")  # noqa: SIM115 (closed at the end)
    if os.geteuid() == 0:
        # Drop to the user and exec again, as systemd starts a service: a process that changed its uid
        # is not dumpable, so its children could not pidfd_getfd() from it (found in the first run).
        # The report stays open across the exec: the user may not reach its directory.
        account = pwd.getpwnam(args.user)
        os.set_inheritable(report.fileno(), True)
        os.environ["SANDBOX_CHECK_REPORT_FD"] = str(report.fileno())
        os.setgroups([])
        os.setgid(account.pw_gid)
        os.setuid(account.pw_uid)
        os.execv(sys.executable, [sys.executable, *sys.argv])
    device_classes(results, args.device_class)
    scratch = tempfile.mkdtemp(prefix="sandbox-check-")
    os.umask(0o077)
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="ascii") as scope:
            print(f"yama ptrace_scope {scope.read().strip()}", flush=True)
    except OSError:
        print("yama ptrace_scope: not present", flush=True)
    # The unit points the JIT caches into its CacheDirectory; here a private scratch directory.
    for variable in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "XDG_CACHE_HOME", "HOME"):
        os.environ[variable] = os.path.join(scratch, variable.lower())
        os.makedirs(os.environ[variable], exist_ok=True)
    if args.no_filter:
        print(f"baseline without the filter, uid {os.getuid()}", flush=True)
    else:
        install_filter(build_filter(denied))
        check(results, "filter installed", True, f"{len(denied)} denied syscalls, uid {os.getuid()}")
        controls(results)
    workload(results)
    with report:
        json.dump(results, report, indent=1)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
