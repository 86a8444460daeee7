"""Runs inside fresh network, mount and PID namespaces (started by pod_rehearsal.py): a bridge standing in
for the cluster network, one network namespace per pod with its own address, the pods' stable names in
/etc/hosts, then every pod's command with its environment. Writes each pod's exit status to a JSON file.

Usage: python pod_network.py SPEC.json RESULT.json. Standard library and iproute2 only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

BRIDGE = "nnsqlbr0"


def ip(*args: str, pid: int | None = None) -> None:
    command = ["ip", *args] if pid is None else ["nsenter", "-t", str(pid), "-n", "ip", *args]
    subprocess.run(command, check=True)


def network_namespace(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def start_pod(pod: dict, number: int) -> subprocess.Popen:
    """The pod's command in a network namespace of its own, held until its interface is up."""
    wait = 'read go; exec "$@"'
    with open(pod["log"], "wb") as log:
        process = subprocess.Popen(
            ["unshare", "--net", "sh", "-c", wait, "pod", *pod["command"]],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=pod["env"],
            cwd=pod["workdir"],
        )
    ours = network_namespace(os.getpid())
    deadline = time.monotonic() + 10
    while network_namespace(process.pid) == ours:  # until unshare has made the namespace
        assert time.monotonic() < deadline, "unshare --net did not start"
        time.sleep(0.01)
    veth = f"veth{number}"
    ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", str(process.pid))
    ip("link", "set", veth, "master", BRIDGE, "up")
    ip("link", "set", "lo", "up", pid=process.pid)
    ip("addr", "add", f"{pod['address']}/24", "dev", "eth0", pid=process.pid)
    ip("link", "set", "eth0", "up", pid=process.pid)
    assert process.stdin is not None
    process.stdin.write(b"go\n")
    process.stdin.close()
    return process


def main(spec_path: str, result_path: str) -> None:
    with open(spec_path) as file:
        spec = json.load(file)
    ip("link", "set", "lo", "up")
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", spec["gateway"] + "/24", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")
    subprocess.run(["mount", "--bind", spec["hosts"], "/etc/hosts"], check=True)
    processes = [start_pod(pod, number) for number, pod in enumerate(spec["pods"])]
    while any(process.poll() is None for process in processes):
        if any(process.poll() not in (None, 0) for process in processes):  # as spawn stops the group
            for process in processes:
                if process.poll() is None:
                    process.kill()
        time.sleep(0.2)
    codes = [process.wait() for process in processes]
    with open(result_path, "w") as result:
        json.dump({"exit_codes": codes}, result)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
