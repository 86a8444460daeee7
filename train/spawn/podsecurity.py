"""The Kubernetes Pod Security Standards, as checks over a pod spec.

A namespace labelled `pod-security.kubernetes.io/enforce: restricted` admits only pods that pass every
check here; `baseline` only those that pass the baseline ones (kubernetes.io/docs/concepts/security/
pod-security-standards). spawn's own pods pass both (the tests check it); what a --pod-file or --overlay
adds is checked before anything is created: privilege is refused unless --allow-privileged, the rest is
said in one warning line each.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

# Capabilities the baseline profile lets a container add; restricted lets it add NET_BIND_SERVICE only.
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


@dataclass(frozen=True)
class Violation:
    profile: str  # "baseline" (and so restricted too) or "restricted"
    field: str
    why: str

    def __str__(self) -> str:
        return f"{self.field}: {self.why} (not allowed at the {self.profile} Pod Security level)"


def containers(spec: dict) -> Iterator[tuple[str, dict]]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for number, item in enumerate(spec.get(kind) or []):
            yield f"{kind}[{number}]", item


def baseline(spec: dict) -> Iterator[Violation]:
    for name in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(name):
            yield Violation("baseline", name, "the pods share the node's namespace")
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            path = (volume["hostPath"] or {}).get("path", "?")
            yield Violation(
                "baseline", f"volumes[{volume.get('name')}].hostPath", f"mounts the node's {path}"
            )
    pod = spec.get("securityContext") or {}
    yield from context_baseline("securityContext", pod)
    for sysctl in pod.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            yield Violation("baseline", "securityContext.sysctls", f"sets {sysctl.get('name')}")
    for where, item in containers(spec):
        context = item.get("securityContext") or {}
        if context.get("privileged"):
            yield Violation("baseline", f"{where}.securityContext.privileged", "a privileged container")
        added = set((context.get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPABILITIES:
            yield Violation(
                "baseline", f"{where}.capabilities.add", f"adds {sorted(added - BASELINE_CAPABILITIES)}"
            )
        if (context.get("procMount") or "Default") != "Default":
            yield Violation("baseline", f"{where}.securityContext.procMount", "an unmasked /proc")
        if any(port.get("hostPort") for port in item.get("ports") or []):
            yield Violation("baseline", f"{where}.ports.hostPort", "listens on the node's ports")
        yield from context_baseline(f"{where}.securityContext", context)


def context_baseline(where: str, context: dict) -> Iterator[Violation]:
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        yield Violation("baseline", f"{where}.seccompProfile", "no seccomp filter")
    if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
        yield Violation("baseline", f"{where}.appArmorProfile", "no AppArmor profile")
    selinux = context.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
        yield Violation("baseline", f"{where}.seLinuxOptions", "a custom SELinux user, role or type")
    if (context.get("windowsOptions") or {}).get("hostProcess"):
        yield Violation("baseline", f"{where}.windowsOptions.hostProcess", "a host process")


def restricted(spec: dict) -> Iterator[Violation]:
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            yield Violation("restricted", f"volumes[{volume.get('name')}]", f"a {sorted(kinds)[0]} volume")
    pod = spec.get("securityContext") or {}
    pod_seccomp = (pod.get("seccompProfile") or {}).get("type")
    if pod.get("runAsUser") == 0:
        yield Violation("restricted", "securityContext.runAsUser", "runs as root")
    for where, item in containers(spec):
        context = item.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            yield Violation("restricted", f"{where}.securityContext", "allowPrivilegeEscalation is not false")
        non_root = context.get("runAsNonRoot", pod.get("runAsNonRoot"))
        if non_root is not True:
            yield Violation("restricted", f"{where}.securityContext", "runAsNonRoot is not true")
        if context.get("runAsUser") == 0:
            yield Violation("restricted", f"{where}.securityContext.runAsUser", "runs as root")
        seccomp = (context.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            yield Violation("restricted", f"{where}.securityContext", "no RuntimeDefault seccomp profile")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            yield Violation("restricted", f"{where}.capabilities", "does not drop ALL capabilities")
        if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            yield Violation("restricted", f"{where}.capabilities.add", "adds capabilities")


def violations(spec: dict) -> list[Violation]:
    """Every rule of the restricted profile (which includes baseline's) that `spec` breaks."""
    return [*baseline(spec), *restricted(spec)]


def privileged(spec: dict) -> bool:
    return any((item.get("securityContext") or {}).get("privileged") for _, item in containers(spec))


def user_additions(spec: dict) -> list[str]:
    """Warnings for what a user's pod file or overlay gives the pods beyond the restricted profile."""
    lines = [str(v) for v in violations(spec)]
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account:
        lines.append(f"serviceAccountName: {account}: the pods act with that account's rights in the cluster")
    if spec.get("automountServiceAccountToken"):
        lines.append("automountServiceAccountToken: the pods get a token for the Kubernetes API")
    return lines
