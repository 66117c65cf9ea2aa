"""TEST DOUBLE for Proxmox's `qm` and `pct` (installed as both; argv[0] picks which).

No Proxmox VE runs in a container, so these record every call as a JSON line in the fake kernel's
journal (the same file tests/support/fake_sysfs.py `serve` appends its sysfs operations to), which
lets the scenario assert the order of guest stops/starts and driver moves.

They behave like the real commands where the role depends on it:
- `status ID` prints `status: running` or `status: stopped`;
- `qm start` fails, like Proxmox, unless every hostpci device is bound to vfio-pci; then it starts
  a holder process that keeps /dev/vfio/<group> open (what QEMU does), so pci_driver_bind's
  "device in use" check sees a real process;
- `pct start` fails unless every GPU is on nvidia and /dev/nvidiactl, /dev/nvidia-uvm exist; its
  holder keeps /dev/nvidiaN open (the container's CUDA processes);
- `shutdown ID [--timeout N] [--forceStop 1]` stops the holder;
- `config ID` prints the guest's configuration lines as given (the scenario writes them in Proxmox's
  own `key: value` format: hostpciN / devN / lxc.* entries, see prepare.yml for their sources); they are
  data for the role's check, the stand-in itself starts guests from the device lists below.
Fault injection: "fail_start": ["qm 100"] makes that `start` fail like a QEMU that exits at once
(after the GPUs were moved), for the scenario's rollback tests; "start_fails_running": ["pct 200"]
starts the guest but exits non-zero (a start that timed out while the guest came up); "fail_shutdown":
["pct 200"] makes `shutdown`/`stop` fail and leaves the guest running (a guest that ignores the
request and whose forced stop fails, e.g. a stuck process in D state).
Config: /etc/gpufleet-fake/pve.json {"fake_base": DIR, "journal": FILE, "vms": {"100": [addr...]},
"cts": {"200": [addr...]}, "config": {"qm 100": [line...], "pct 200": [line...]}, "fail_start": [...]}.
State: /var/lib/gpufleet-fake/<qm|pct>-<id>.pid.
"""

import json
import os
import signal
import subprocess
import sys
import time

CONFIG = "/etc/gpufleet-fake/pve.json"
STATE = "/var/lib/gpufleet-fake"
HOLDER = ("import os, sys, time\n"
          "fds = [os.open(p, os.O_RDONLY) for p in sys.argv[1:]]\n"
          "while True:\n    time.sleep(3600)\n")


def record(conf, actor, args, result):
    with open(conf["journal"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"t": time.time(), "actor": actor, "op": args[0], "id": args[1] if len(args) > 1 else None,
                                 "args": args[2:], "result": result}) + "\n")


def driver_of(conf, address):
    link = os.path.join(conf["fake_base"], "sys", "bus", "pci", "devices", address, "driver")
    return os.path.basename(os.readlink(link)) if os.path.islink(link) else None


def pid_of(actor, guest):
    try:
        with open(os.path.join(STATE, "%s-%s.pid" % (actor, guest)), encoding="utf-8") as handle:
            pid = int(handle.read())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def holder_paths(conf, actor, devices):
    paths = []
    for address in devices:
        if actor == "qm":
            group = os.path.basename(os.readlink(os.path.join(conf["fake_base"], "sys", "bus", "pci", "devices",
                                                              address, "iommu_group")))
            path = os.path.join(conf["fake_base"], "dev", "vfio", group)
        else:
            path = os.path.join(conf["fake_base"], "dev", "nvidia%d" % (int(address.split(":")[1], 16) - 1))
        if path not in paths:
            paths.append(path)
    return paths


def main():
    actor = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    with open(CONFIG, encoding="utf-8") as handle:
        conf = json.load(handle)
    if len(args) < 2 or args[0] not in ("status", "start", "shutdown", "stop", "config"):
        record(conf, actor, args or ["?"], "usage")
        sys.stderr.write("%s stand-in: supports status|start|shutdown|stop|config ID\n" % actor)
        return 2
    command, guest = args[0], args[1]
    devices = conf["vms" if actor == "qm" else "cts"].get(guest)
    if devices is None:
        record(conf, actor, args, "no such guest")
        sys.stderr.write("Configuration file '%s/%s.conf' does not exist\n" % (
            "nodes/pve/qemu-server" if actor == "qm" else "nodes/pve/lxc", guest))
        return 2
    if command == "config":
        sys.stdout.write("".join(line + "\n" for line in conf.get("config", {}).get("%s %s" % (actor, guest), [])))
        return 0
    pid = pid_of(actor, guest)
    if command == "status":
        print("status: %s" % ("running" if pid else "stopped"))
        record(conf, actor, args, "running" if pid else "stopped")
        return 0
    if command in ("shutdown", "stop"):
        if pid and "%s %s" % (actor, guest) in conf.get("fail_shutdown", []):
            record(conf, actor, args, "failed: injected")
            sys.stderr.write("%s %s: shutdown failed: got timeout\n" % ("VM" if actor == "qm" else "CT", guest))
            return 255
        if pid:
            os.kill(pid, signal.SIGTERM)
            for _attempt in range(100):
                try:
                    os.kill(pid, 0)
                    time.sleep(0.05)
                except OSError:
                    break
            link = os.path.join(conf["fake_base"], "proc", str(pid))
            if os.path.islink(link):
                os.unlink(link)
            os.unlink(os.path.join(STATE, "%s-%s.pid" % (actor, guest)))
        record(conf, actor, args, "ok")
        return 0
    if pid:  # start while running: Proxmox errors out
        record(conf, actor, args, "already running")
        sys.stderr.write("%s %s already running\n" % ("VM" if actor == "qm" else "CT", guest))
        return 255
    want = "vfio-pci" if actor == "qm" else "nvidia"
    wrong = ["%s on %s" % (a, driver_of(conf, a)) for a in devices if driver_of(conf, a) != want]
    if actor == "pct":
        wrong += ["missing /dev/%s" % n for n in ("nvidiactl", "nvidia-uvm")
                  if not os.path.exists(os.path.join(conf["fake_base"], "dev", n))]
    if "%s %s" % (actor, guest) in conf.get("fail_start", []):
        record(conf, actor, args, "failed: injected")
        sys.stderr.write("start failed: QEMU exited with code 1\n" if actor == "qm" else
                         "startup for container '%s' failed\n" % guest)
        return 255
    if wrong:
        record(conf, actor, args, "refused: " + "; ".join(wrong))
        sys.stderr.write("cannot start %s %s: devices not on %s: %s\n" % (actor, guest, want, "; ".join(wrong)))
        return 255
    paths = holder_paths(conf, actor, devices)
    proc = subprocess.Popen([sys.executable, "-c", HOLDER] + paths, start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _attempt in range(100):  # until the holder has its files open
        if len(os.listdir("/proc/%d/fd" % proc.pid)) >= 3 + len(paths):
            break
        time.sleep(0.05)
    os.makedirs(STATE, exist_ok=True)
    with open(os.path.join(STATE, "%s-%s.pid" % (actor, guest)), "w", encoding="utf-8") as handle:
        handle.write(str(proc.pid))
    # The fake procfs shows the guest's process (pci_driver_bind looks for holders there).
    os.symlink("/proc/%d" % proc.pid, os.path.join(conf["fake_base"], "proc", str(proc.pid)))
    if "%s %s" % (actor, guest) in conf.get("start_fails_running", []):
        record(conf, actor, args, "failed: injected (running)")
        sys.stderr.write("start failed: got timeout\n")
        return 255
    record(conf, actor, args, "ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
