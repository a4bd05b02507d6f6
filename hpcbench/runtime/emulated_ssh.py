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

Standard library only, so it runs under any ``python3``; the file is
executable and is what ``-launcher-exec`` names
(:func:`hpcbench.runtime.emulated_hosts.launcher_path`).
"""

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


def main(argv=None):
    """Run the command given as ssh would, in a UTS namespace named after the host; exec, so no return."""
    try:
        host, command = split_ssh_arguments(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        sys.stderr.write(f"emulated_ssh: {exc}\n")
        return 255  # ssh's own status for its errors
    os.execvp("unshare", ["unshare", "--uts", "--mount", "--propagation", "private", "/bin/sh", "-c", _SETUP,
                          "emulated_ssh", host, command])


# In the new namespaces: the host name, then a private /etc/hosts (a temporary copy plus the name, bound over
# the file in this mount namespace only, and unlinked at once: the mount keeps it), then the command.
_SETUP = """hostname "$1" || exit 255
f=$(mktemp) || exit 255
{ cat /etc/hosts 2>/dev/null; printf '127.0.0.1\t%s\n' "$1"; } > "$f" && mount --bind "$f" /etc/hosts
ok=$?
rm -f "$f"
[ "$ok" = 0 ] || exit 255
exec /bin/sh -c "$2"
"""


if __name__ == "__main__":
    sys.exit(main())
