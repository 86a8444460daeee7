"""`nnsql spawn rbac --namespace NS`: the Role and RoleBinding a cluster admin grants for spawn.

PERMISSIONS lists exactly the API calls train/spawn/kube.py makes (a test drives every backend method
through a recording client and compares): create, watch by listing and delete the run's ConfigMap, Secret,
Service, NetworkPolicy and Jobs; list pods and read their logs and events; create, read and delete the
collector pod and exec into it to copy the outputs (pods/exec: `get` opens the stream, `create` is what
clusters from 1.35 on check for it). The server's /version, which spawn reads first, is open to every
authenticated user.
"""

from __future__ import annotations

import argparse
import getpass
import sys

import yaml

ROLE = "nnsql-spawn"
PERMISSIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("", "configmaps", ("create", "delete", "list")),
    ("", "secrets", ("create", "delete", "list")),
    ("", "services", ("create", "delete", "list")),
    ("batch", "jobs", ("create", "delete", "list")),
    ("networking.k8s.io", "networkpolicies", ("create", "delete", "list")),
    ("", "pods", ("create", "delete", "get", "list")),
    ("", "pods/log", ("get",)),
    ("", "pods/exec", ("create", "get")),
    ("", "events", ("list",)),
)


def role(namespace: str) -> dict:
    rules = [
        {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}
        for group, resource, verbs in PERMISSIONS
    ]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ROLE, "namespace": namespace},
        "rules": rules,
    }


def subjects(args: argparse.Namespace) -> list[dict]:
    found = [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name} for name in args.user]
    found += [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name} for name in args.group]
    for name in args.service_account:
        namespace, _, account = name.rpartition(":")
        found.append({"kind": "ServiceAccount", "name": account, "namespace": namespace or args.namespace})
    return found


def role_binding(namespace: str, bound: list[dict]) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": ROLE, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
        "subjects": bound,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="nnsql spawn rbac",
        description="Print the Role and RoleBinding that let a user run train.spawn in one namespace "
        "(apply them with kubectl apply -f -).",
    )
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--user", action="append", default=[], help="a user to bind (repeatable)")
    parser.add_argument("--group", action="append", default=[], help="a group to bind (repeatable)")
    parser.add_argument(
        "--service-account", action="append", default=[], metavar="[NAMESPACE:]NAME", help="repeatable"
    )
    args = parser.parse_args(argv)
    bound = subjects(args)
    if not bound:
        login = getpass.getuser()
        print(f"# bound to the user {login!r} (this login): choose with --user, --group or --service-account")
        bound = [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": login}]
    documents = [role(args.namespace), role_binding(args.namespace, bound)]
    sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))
    return 0
