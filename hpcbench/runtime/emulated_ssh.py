#!/usr/bin/env python3
"""An ``ssh`` stand-in that starts a command on an emulated host of this machine.

MPICH's Hydra starts one proxy per host through ``ssh`` and lets a program
take ssh's place (``mpiexec -launcher ssh -launcher-exec THIS -hosts
nodeA:2,nodeB:2 -n 4 ...``). Called as ssh is called (``[options] HOST
COMMAND...``), this program runs ``COMMAND`` on the same machine in a new
UTS namespace (``unshare --uts``) whose host name is ``HOST``, and in a
mount namespace whose ``/etc/hosts`` adds ``127.0.0.1 HOST`` (so the name
resolves, as a cluster's DNS would resolve it, for gloo's rendezvous and
the like; the machine's own ``/etc/hosts`` is not touched). Every rank
then reports that host name, ``MPI_COMM_TYPE_SHARED`` splits by it (Hydra
numbers nodes by proxy), and ranks on different emulated hosts talk through
MPICH's network module, not shared memory. It needs root (or a user
namespace), ``unshare`` and ``hostname`` from util-linux.

Where ``HPCBENCH_EMULATED_NET`` names a network's description (written by
:class:`hpcbench.runtime.emulated_net.EmulatedNetwork`), the command runs
in its host's network namespace too (``ip netns exec``), with that file's
``/etc/hosts`` (every host at its own address, the launching host at the
bridge's) and its variables set unless already set (``UCX_NET_DEVICES``...);
a host the network does not have is refused (status 255), so that no host
silently bypasses the link.

Standard library only, so it runs under any ``python3``; the file is
executable and is what ``-launcher-exec`` names
(:func:`hpcbench.runtime.emulated_hosts.launcher_path`).
"""

import json
import os
import sys

# ssh's options that take a value (OpenSSH 9, ``man ssh``); every other option is a flag.
_WITH_VALUE = set("BbcDEeFIiJLlmOoPpQRSWw")


def split_ssh_arguments(argv):
    """Split ssh's command line into (host, command string).

    Parameters
    ----------
    argv : list of str
        The arguments after the program name, as ssh receives them
        (``["-x", "nodeA", "/path/hydra_pmi_proxy", "--control-port", ...]``).

    Returns
    -------
    tuple of (str, str)
        The host (a ``user@`` prefix removed) and the command, its words
        joined by spaces as ssh joins them for the remote shell.

    Raises
    ------
    ValueError
        No host, no command, or an option missing its value.
    """
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        opt = argv[i]
        letters = opt[1:]
        for k, letter in enumerate(letters):
            if letter in _WITH_VALUE:
                if k + 1 == len(letters):  # value is the next argument
                    if i + 1 >= len(argv):
                        raise ValueError(f"ssh option -{letter} needs a value")
                    i += 1
                break  # the rest of this word is the value
        i += 1
    if i < len(argv) and argv[i] == "--":
        i += 1
    if i >= len(argv):
        raise ValueError("no host given")
    host = argv[i].rsplit("@", 1)[-1]
    command = " ".join(argv[i + 1:])
    if not host or not command.strip():
        raise ValueError(f"no command given for host {host!r}")
    return host, command


def network_prefix(host, environ=None):
    """The command prefix, ``/etc/hosts`` file and variables that put ``host`` in its emulated network.

    Parameters
    ----------
    host : str
        The host name.
    environ : mapping, optional
        The environment (default ``os.environ``); ``HPCBENCH_EMULATED_NET``
        names the network's JSON description.

    Returns
    -------
    tuple of (list of str, str, dict)
        ``(["ip", "netns", "exec", NS], HOSTS_FILE, VARIABLES)``, or
        ``([], "", {})`` without a network.

    Raises
    ------
    ValueError
        The description cannot be read, or has no namespace for ``host``.
    """
    path = (os.environ if environ is None else environ).get("HPCBENCH_EMULATED_NET", "")
    if not path:
        return [], "", {}
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f"HPCBENCH_EMULATED_NET={path}: {exc}") from None
    hosts = spec.get("hosts", {})
    if host not in hosts:
        raise ValueError(f"host {host!r} is not in the emulated network of {path} (hosts: {sorted(hosts)})")
    return ["ip", "netns", "exec", hosts[host]], spec["hosts_file"], dict(spec.get("env", {}))


def main(argv=None):
    """Run the command given as ssh would, in a UTS namespace named after the host; exec, so no return."""
    try:
        host, command = split_ssh_arguments(sys.argv[1:] if argv is None else argv)
        prefix, hosts_file, variables = network_prefix(host)
    except ValueError as exc:
        sys.stderr.write(f"emulated_ssh: {exc}\n")
        return 255  # ssh's own status for its errors
    env = dict(os.environ)
    for key, value in variables.items():
        env.setdefault(key, value)
    os.execvpe(prefix[0] if prefix else "unshare",
               [*prefix, "unshare", "--uts", "--mount", "--propagation", "private", "/bin/sh", "-c", _SETUP,
                "emulated_ssh", host, command, hosts_file], env)


# In the new namespaces: the host name, then a private /etc/hosts (a temporary copy plus the name, or the
# network's file, bound over the file in this mount namespace only, and unlinked at once: the mount keeps it),
# then the command.
_SETUP = """hostname "$1" || exit 255
f=$(mktemp) || exit 255
if [ -n "$3" ]; then cat "$3"; else cat /etc/hosts 2>/dev/null; printf '127.0.0.1\t%s\n' "$1"; fi > "$f" &&
  mount --bind "$f" /etc/hosts
ok=$?
rm -f "$f"
[ "$ok" = 0 ] || exit 255
exec /bin/sh -c "$2"
"""


if __name__ == "__main__":
    sys.exit(main())
